//! The server-side terminal emulator (avt) that every session's output is fed into, and
//! the keyframes it produces: escape sequences that repaint the screen exactly (contents,
//! SGR, cursor, alternate screen, modes) when written into a terminal of the same size.
//! A quiet screen is kept as its dump instead: hundreds of bytes in place of the two grids
//! of cells an emulator holds (some 140 KiB at 120×30), restored exactly when it changes.

/// Written first in every keyframe: a full reset, so the snapshot applies to any terminal state.
const RESET: &str = "\x1bc";

pub struct Screen {
    /// The emulator, while the screen is in use (`vt()` restores it from `dump`).
    vt: Option<avt::Terminal>,
    /// While `vt` is let go: its dump.
    dump: String,
    /// Columns and rows.
    size: (usize, usize),
    /// Bytes of a UTF-8 sequence split across two reads.
    pending: Vec<u8>,
    tracker: Tracker,
    /// Plain lines not fed to the emulator yet: a flood is fed as its last screenful.
    held: Vec<u8>,
    /// More than a screenful scrolled off before `held`: a blank screenful is owed first.
    owed_blank: bool,
}

/// Held plain output beyond this is fed even without a screenful to skip (each chunk
/// looks for a cut from the end of what is held, so the bound also bounds that scan).
const HOLD_LIMIT: usize = 256 << 10;

impl Screen {
    pub fn new(cols: u16, rows: u16) -> Screen {
        // It starts as a blank screen's dump: the emulator is made when output comes.
        let size = (usize::from(cols.max(1)), usize::from(rows.max(1)));
        let blank = avt::Terminal::new(size.0, size.1).expect("dimensions are at least 1");
        Screen {
            vt: None,
            dump: blank.dump(),
            size,
            pending: Vec::new(),
            tracker: Tracker::default(),
            held: Vec::new(),
            owed_blank: false,
        }
    }

    /// The emulator, restored from its dump if it was let go.
    fn vt(&mut self) -> &mut avt::Terminal {
        let ((cols, rows), dump) = (self.size, &mut self.dump);
        self.vt.get_or_insert_with(|| {
            let mut vt = avt::Terminal::new(cols, rows).expect("a screen has at least one cell");
            vt.feed(std::mem::take(dump).as_str());
            vt
        })
    }

    /// Whether the emulator is held (not compacted).
    pub fn in_use(&self) -> bool {
        self.vt.is_some() || !self.held.is_empty()
    }

    /// Lets the emulator go, keeping its dump, until the screen is next changed or read:
    /// for a screen that has gone quiet.
    pub fn compact(&mut self) {
        self.settle();
        if let Some(vt) = self.vt.take() {
            self.dump = vt.dump();
        }
        self.held = Vec::new();
    }

    /// Feeds raw PTY output; a multi-byte character split across calls is kept for the next.
    ///
    /// A flood of plain lines (`cat`, `yes`, build logs) is mostly text that scrolls off
    /// before anyone could see it. While the emulator is in its ground state with no
    /// scroll region, plain lines are held back; whatever is followed by more than a
    /// screenful is dropped, and when the screen is next needed (or other output arrives)
    /// only a blank screenful — the scroll the dropped lines caused, in the same pen — and
    /// the rest are fed. The screen, cursor and modes come out exactly as if every byte
    /// had been fed.
    pub fn feed(&mut self, bytes: &[u8]) {
        let (_, rows) = self.size;
        let quiet = self.tracker.quiet() && self.pending.is_empty();
        self.tracker.feed(bytes, rows);
        if quiet && plain(bytes) {
            self.held.extend_from_slice(bytes);
            if let Some(cut) = scrolled_off(&self.held, rows) {
                self.held.drain(..cut);
                self.owed_blank = true;
            }
            if self.held.len() > HOLD_LIMIT {
                self.settle();
            }
            return;
        }
        self.settle();
        let text = decode_utf8_stream(&mut self.pending, bytes);
        self.vt().feed(text.as_str());
    }

    /// Feeds what is held: the owed blank screenful, then the held lines.
    fn settle(&mut self) {
        if std::mem::take(&mut self.owed_blank) {
            let rows = self.size.1;
            let mut blank = String::with_capacity(1 + 2 * rows);
            blank.push('\r');
            blank.extend(std::iter::repeat_n('\n', 2 * rows));
            self.vt().feed(blank.as_str());
        }
        if !self.held.is_empty() {
            // A character split at the end of what is held waits for the next bytes.
            let text = decode_utf8_stream(&mut self.pending, &self.held);
            self.vt().feed(text.as_str());
            self.held.clear();
        }
    }

    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.settle();
        let size = (usize::from(cols.max(1)), usize::from(rows.max(1)));
        if size.1 != self.size.1 {
            // The emulator resets its margins when the height changes.
            self.tracker.region = false;
        }
        self.vt().resize(size.0, size.1);
        self.size = size;
    }

    pub fn size(&self) -> (u16, u16) {
        (self.size.0 as u16, self.size.1 as u16)
    }

    /// The keyframe snapshot: a reset, avt's screen dump, then the input modes avt does
    /// not track (mouse reporting, focus events, bracketed paste).
    pub fn snapshot(&mut self) -> Vec<u8> {
        self.settle();
        let mut out = String::from(RESET);
        match &self.vt {
            Some(vt) => out.push_str(&vt.dump()),
            None => out.push_str(&self.dump),
        }
        for mode in &self.tracker.modes {
            out.push_str(&format!("\x1b[?{mode}h"));
        }
        out.into_bytes()
    }

    /// The tracked input modes that are set, in ascending order.
    pub fn input_modes(&self) -> Vec<u16> {
        self.tracker.modes.iter().copied().collect()
    }

    /// The visible text, one string per row with trailing blanks trimmed (for tests and logs).
    pub fn text(&mut self) -> Vec<String> {
        self.settle();
        self.vt()
            .screen()
            .visible_lines()
            .map(|l| l.text().trim_end().to_owned())
            .collect()
    }

    /// Every cell's character and pen, row by row: two screens are equal cell for cell
    /// exactly when these are equal.
    pub fn cells(&mut self) -> Vec<Vec<(char, avt::Pen)>> {
        self.settle();
        self.vt()
            .screen()
            .visible_lines()
            .map(|l| l.cells().iter().map(|c| (c.char(), *c.pen())).collect())
            .collect()
    }

    pub fn cursor(&mut self) -> avt::Cursor {
        self.settle();
        self.vt().cursor()
    }

    pub fn alternate_screen(&mut self) -> bool {
        self.settle();
        self.vt().active_screen_kind() == avt::ScreenKind::Alternate
    }
}

/// Text that moves the cursor along its line and down, and nothing else: printable ASCII,
/// CR, LF, TAB, BS and UTF-8 beyond ASCII (the emulator prints every character from U+00A0
/// on, and an invalid sequence as U+FFFD), but no C1 control (U+0080..U+009F, 0xC2 then
/// 0x80..0x9F, which the emulator obeys like their escape forms) and no trailing 0xC2
/// that could start one.
fn plain(bytes: &[u8]) -> bool {
    let moving = |b: u8| matches!(b, 0x20..=0x7e | b'\r' | b'\n' | b'\t' | 0x08 | 0x80..=0xff);
    // A flood is checked 64 bytes at a time without a branch per byte, which the compiler
    // turns into vector instructions.
    bytes
        .chunks(64)
        .all(|c| c.iter().fold(true, |all, &b| all & moving(b)))
        && memchr::memchr_iter(0xc2, bytes)
            .all(|i| bytes.get(i + 1).is_some_and(|n| !(0x80..0xa0).contains(n)))
}

/// Where the part of plain output that still shows begins, when the rest is sure to
/// scroll off: just after a CR LF (the cursor at column 0) with more than a screenful of
/// line feeds before it (the cursor on the bottom row, the line below fresh) and a
/// screenful after it (every visible row is written after the cut).
fn scrolled_off(bytes: &[u8], rows: usize) -> Option<usize> {
    let cut = memchr::memrchr_iter(b'\n', bytes)
        .enumerate()
        .find(|&(after, i)| after >= rows && i > 0 && bytes[i - 1] == b'\r')
        .map(|(_, i)| i + 1)?;
    memchr::memchr_iter(b'\n', &bytes[..cut])
        .nth(rows)
        .map(|_| cut)
}

/// DEC private modes that change what the terminal sends, which the emulator ignores.
const TRACKED_MODES: [u16; 9] = [1000, 1002, 1003, 1004, 1005, 1006, 1015, 1016, 2004];

/// Follows the output the way the emulator's parser does, across chunk boundaries: its
/// state (ground, escape, control sequence, or a string), the input modes in
/// `TRACKED_MODES` (`CSI ? Pm h` / `l`; reset by `ESC c` and `CSI ! p`), and whether a
/// scroll region may be set (`CSI Pt ; Pb r`).
#[derive(Default)]
struct Tracker {
    modes: std::collections::BTreeSet<u16>,
    state: Parse,
    region: bool,
    /// A 0xC2 byte was the last: the next decides whether it is a C1 control.
    c2: bool,
}

#[derive(Default)]
enum Parse {
    #[default]
    Ground,
    Esc,
    EscIntermediate,
    Csi(Csi),
    /// OSC: ends at BEL, ST, CAN or SUB.
    Osc,
    /// DCS, SOS, PM or APC: ends at ST, CAN or SUB.
    Str,
}

#[derive(Default)]
struct Csi {
    /// The first byte was `?`.
    private: bool,
    /// Another prefix (`<`, `=`, `>`) or an intermediate (`!` is noted in `bang`).
    marked: bool,
    bang: bool,
    colon: bool,
    params: Vec<u16>,
    current: Option<u16>,
}

impl Tracker {
    /// Whether the emulator is in its ground state with no scroll region.
    fn quiet(&self) -> bool {
        matches!(self.state, Parse::Ground) && !self.region && !self.c2
    }

    fn feed(&mut self, mut bytes: &[u8], rows: usize) {
        while !bytes.is_empty() {
            if matches!(self.state, Parse::Ground) && !self.c2 {
                // Output is mostly text: jump to the next byte that can leave the ground.
                match memchr::memchr2(0x1b, 0xc2, bytes) {
                    Some(i) => bytes = &bytes[i..],
                    None => return,
                }
            }
            self.step(bytes[0], rows);
            bytes = &bytes[1..];
        }
    }

    fn step(&mut self, b: u8, rows: usize) {
        if std::mem::take(&mut self.c2) {
            match b {
                0x80..=0x9f => return self.c1(b),
                // Another printable character, or an invalid sequence whose replacement
                // prints; either way a following byte is read afresh.
                _ => self.byte(b'A', rows),
            }
            if !(0x80..0xc0).contains(&b) {
                self.step(b, rows);
            }
            return;
        }
        match b {
            0xc2 => self.c2 = true,
            // A character of two or more bytes reads as one printable (avt maps them all
            // to one); continuation bytes add nothing.
            0xc3..=0xff | 0xc0 | 0xc1 => self.byte(b'A', rows),
            0x80..=0xbf => {}
            _ => self.byte(b, rows),
        }
    }

    fn c1(&mut self, c: u8) {
        self.state = match (std::mem::take(&mut self.state), c) {
            (_, 0x9b) => Parse::Csi(Csi::default()),
            (_, 0x9d) => Parse::Osc,
            (_, 0x90 | 0x98 | 0x9e | 0x9f) => Parse::Str,
            (_, 0x9c) => Parse::Ground,
            (state, _) => state,
        };
    }

    fn byte(&mut self, b: u8, rows: usize) {
        self.state = match (std::mem::take(&mut self.state), b) {
            (_, 0x1b) => Parse::Esc,
            (_, 0x18 | 0x1a) => Parse::Ground,
            (Parse::Osc, 0x07) => Parse::Ground,
            (state @ (Parse::Osc | Parse::Str), _) => state,
            (Parse::Esc, b'[') => Parse::Csi(Csi::default()),
            (Parse::Esc, b']') => Parse::Osc,
            (Parse::Esc, b'P' | b'X' | b'^' | b'_') => Parse::Str,
            (Parse::Esc, b'c') => {
                self.modes.clear();
                self.region = false;
                Parse::Ground
            }
            (Parse::Esc | Parse::EscIntermediate, 0x20..=0x2f) => Parse::EscIntermediate,
            (Parse::Esc | Parse::EscIntermediate, 0x30..=0x7e) => Parse::Ground,
            (Parse::Csi(csi), 0x40..=0x7e) => {
                self.dispatch(csi, b, rows);
                Parse::Ground
            }
            (Parse::Csi(mut csi), _) => {
                csi.collect(b);
                Parse::Csi(csi)
            }
            // C0 controls run inside escapes and control sequences without ending them.
            (state, _) => state,
        };
    }

    fn dispatch(&mut self, mut csi: Csi, final_byte: u8, rows: usize) {
        csi.params.extend(csi.current);
        match (csi.private, csi.marked, csi.bang, final_byte) {
            (true, false, false, b'h' | b'l') => {
                for p in csi.params.into_iter().filter(|p| TRACKED_MODES.contains(p)) {
                    if final_byte == b'h' {
                        self.modes.insert(p);
                    } else {
                        self.modes.remove(&p);
                    }
                }
            }
            (false, false, true, b'p') => {
                self.modes.clear();
                self.region = false;
            }
            (false, false, false, b'r') if csi.colon => self.region = true,
            (false, false, false, b'r') => {
                let param = |i: usize| csi.params.get(i).copied().filter(|&v| v > 0);
                let top = usize::from(param(0).unwrap_or(1));
                let bottom = param(1).map_or(rows, usize::from);
                // What the emulator does: a valid pair sets the margins, anything else
                // leaves them as they were.
                if top < bottom && bottom <= rows {
                    self.region = !(top == 1 && bottom == rows);
                }
            }
            _ => {}
        }
    }
}

impl Csi {
    fn collect(&mut self, b: u8) {
        let first = self.params.is_empty() && self.current.is_none() && !self.marked;
        match b {
            b'0'..=b'9' => {
                let digit = u16::from(b - b'0');
                let value = self
                    .current
                    .unwrap_or(0)
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(digit));
                self.current = value.or(Some(u16::MAX));
            }
            b';' => {
                self.params.push(self.current.take().unwrap_or(0));
            }
            b'?' if first && !self.private => self.private = true,
            b'!' => self.bang = true,
            // A sub-parameter: the emulator takes the sequence, but not as we read it.
            b':' => self.colon = true,
            0x20..=0x3f => self.marked = true,
            _ => {}
        }
    }
}

/// Decodes `input` after the carried-over `pending` bytes; invalid bytes become U+FFFD and an
/// incomplete sequence at the end is carried over again.
fn decode_utf8_stream(pending: &mut Vec<u8>, input: &[u8]) -> String {
    let mut buf = std::mem::take(pending);
    buf.extend_from_slice(input);
    let mut out = String::with_capacity(buf.len());
    let mut rest = buf.as_slice();
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                match e.error_len() {
                    Some(n) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        rest = &after[n..];
                    }
                    None => {
                        pending.extend_from_slice(after);
                        break;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
