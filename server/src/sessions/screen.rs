//! The server-side terminal emulator (avt) that every session's output is fed into, and
//! the keyframes it produces: escape sequences that repaint the screen exactly (contents,
//! SGR, cursor, alternate screen, modes) when written into a terminal of the same size.

/// Written first in every keyframe: a full reset, so the snapshot applies to any terminal state.
const RESET: &str = "\x1bc";

pub struct Screen {
    vt: avt::Terminal,
    /// Bytes of a UTF-8 sequence split across two reads.
    pending: Vec<u8>,
    modes: InputModes,
}

impl Screen {
    pub fn new(cols: u16, rows: u16) -> Screen {
        Screen {
            vt: avt::Terminal::new(usize::from(cols.max(1)), usize::from(rows.max(1)))
                .expect("dimensions are at least 1"),
            pending: Vec::new(),
            modes: InputModes::default(),
        }
    }

    /// Feeds raw PTY output; a multi-byte character split across calls is kept for the next.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.modes.feed(bytes);
        let text = decode_utf8_stream(&mut self.pending, bytes);
        self.vt.feed(text.as_str());
    }

    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.vt
            .resize(usize::from(cols.max(1)), usize::from(rows.max(1)));
    }

    pub fn size(&self) -> (u16, u16) {
        let (cols, rows) = self.vt.size();
        (cols as u16, rows as u16)
    }

    /// The keyframe snapshot: a reset, avt's screen dump, then the input modes avt does
    /// not track (mouse reporting, focus events, bracketed paste).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = String::from(RESET);
        out.push_str(&self.vt.dump());
        for mode in &self.modes.set {
            out.push_str(&format!("\x1b[?{mode}h"));
        }
        out.into_bytes()
    }

    /// The tracked input modes that are set, in ascending order.
    pub fn input_modes(&self) -> Vec<u16> {
        self.modes.set.iter().copied().collect()
    }

    /// The visible text, one string per row with trailing blanks trimmed (for tests and logs).
    pub fn text(&self) -> Vec<String> {
        self.vt
            .screen()
            .visible_lines()
            .map(|l| l.text().trim_end().to_owned())
            .collect()
    }

    /// Every cell's character and pen, row by row: two screens are equal cell for cell
    /// exactly when these are equal.
    pub fn cells(&self) -> Vec<Vec<(char, avt::Pen)>> {
        self.vt
            .screen()
            .visible_lines()
            .map(|l| l.cells().iter().map(|c| (c.char(), *c.pen())).collect())
            .collect()
    }

    pub fn cursor(&self) -> avt::Cursor {
        self.vt.cursor()
    }

    pub fn alternate_screen(&self) -> bool {
        self.vt.active_screen_kind() == avt::ScreenKind::Alternate
    }
}

/// DEC private modes that change what the terminal sends, which the emulator ignores.
const TRACKED_MODES: [u16; 9] = [1000, 1002, 1003, 1004, 1005, 1006, 1015, 1016, 2004];

/// Follows `CSI ? Pm h` / `CSI ? Pm l` (and the resets `ESC c`, `CSI ! p`) across chunk
/// boundaries for the modes in `TRACKED_MODES`.
#[derive(Default)]
struct InputModes {
    set: std::collections::BTreeSet<u16>,
    state: ModeParse,
}

#[derive(Default)]
enum ModeParse {
    #[default]
    Ground,
    Esc,
    Csi,
    Private(Vec<u16>, Option<u16>),
    Bang,
}

impl InputModes {
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if matches!(self.state, ModeParse::Ground) {
                // Output is mostly text: jump to the next escape.
                match bytes.iter().position(|&b| b == 0x1b) {
                    Some(i) => bytes = &bytes[i..],
                    None => return,
                }
            }
            self.step(bytes[0]);
            bytes = &bytes[1..];
        }
    }

    fn step(&mut self, b: u8) {
        self.state = match (std::mem::take(&mut self.state), b) {
            (_, 0x1b) => ModeParse::Esc,
            (ModeParse::Esc, b'[') => ModeParse::Csi,
            (ModeParse::Esc, b'c') => {
                self.set.clear();
                ModeParse::Ground
            }
            (ModeParse::Csi, b'?') => ModeParse::Private(Vec::new(), None),
            (ModeParse::Csi, b'!') => ModeParse::Bang,
            (ModeParse::Bang, b'p') => {
                self.set.clear();
                ModeParse::Ground
            }
            (ModeParse::Private(params, cur), b'0'..=b'9') => {
                let digit = u16::from(b - b'0');
                let cur = cur
                    .unwrap_or(0)
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(digit));
                ModeParse::Private(params, cur.or(Some(u16::MAX)))
            }
            (ModeParse::Private(mut params, cur), b';') => {
                params.extend(cur);
                ModeParse::Private(params, None)
            }
            (ModeParse::Private(mut params, cur), b'h' | b'l') => {
                params.extend(cur);
                for p in params.into_iter().filter(|p| TRACKED_MODES.contains(p)) {
                    if b == b'h' {
                        self.set.insert(p);
                    } else {
                        self.set.remove(&p);
                    }
                }
                ModeParse::Ground
            }
            _ => ModeParse::Ground,
        };
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
mod tests {
    use super::*;

    #[test]
    fn split_utf8_sequences_decode_once_whole() {
        let mut pending = Vec::new();
        let euro = "€".as_bytes();
        assert_eq!(decode_utf8_stream(&mut pending, &euro[..1]), "");
        assert_eq!(decode_utf8_stream(&mut pending, &euro[1..]), "€");
        assert_eq!(decode_utf8_stream(&mut pending, b"a\xffb"), "a\u{FFFD}b");
        assert!(pending.is_empty());
    }

    #[test]
    fn input_modes_survive_split_chunks_and_reach_the_keyframe() {
        let mut live = Screen::new(20, 5);
        for chunk in [
            &b"\x1b[?20"[..],
            b"04h\x1b[?1000;10",
            b"06h\x1b[?25l",
            b"\x1b[?1000l",
        ] {
            live.feed(chunk);
        }
        assert_eq!(live.input_modes(), [1006, 2004]);
        let mut replica = Screen::new(20, 5);
        replica.feed(b"\x1b[?1003h");
        replica.feed(&live.snapshot());
        assert_eq!(
            replica.input_modes(),
            [1006, 2004],
            "the reset clears, the keyframe restores"
        );
        live.feed(b"\x1bc");
        assert!(live.input_modes().is_empty());
    }

    /// A curses-style program: alternate screen, scroll region, colours, cursor moves.
    const FULL_SCREEN_APP: &[u8] = b"shell prompt$ top\r\n\x1b[?1049h\x1b[H\x1b[2J\
        \x1b[1;37;44m top - 10:00:00 up 1 day \x1b[K\x1b[0m\r\n\
        \x1b[2;1H\x1b[7m  PID USER      %CPU \x1b[27m\r\n\
        \x1b[3;5r\x1b[3;1H\x1b[32m  101 root      12.5\x1b[0m\r\n  102 app        3.1\
        \x1b[38;5;202m \xe2\x96\x88\xe2\x96\x88 \x1b[38;2;10;20;30m\xe4\xb8\xad\xe6\x96\x87\x1b[0m\
        \x1b[5;3H\x1b[4mUND\x1b[24m\x1b[1;1H\x1b[?25l\x1b[8;20H";

    #[test]
    fn keyframe_into_a_fresh_emulator_reproduces_a_full_screen_program_cell_for_cell() {
        let mut live = Screen::new(40, 10);
        for chunk in FULL_SCREEN_APP.chunks(7) {
            live.feed(chunk);
        }
        assert!(live.alternate_screen());

        let mut replica = Screen::new(40, 10);
        replica.feed(b"garbage that the keyframe's reset must wipe \x1b[31m");
        replica.feed(&live.snapshot());

        assert_eq!(replica.cells(), live.cells());
        assert_eq!(replica.cursor(), live.cursor());
        assert!(replica.alternate_screen());
        assert_eq!(replica.text()[0], " top - 10:00:00 up 1 day");
        // Output after the keyframe lands identically too (scroll region, pen, cursor).
        for s in [&mut live, &mut replica] {
            s.feed(b"\x1b[3;1H\r\nmore\r\nlines\r\nscroll\x1b[?1049l");
        }
        assert_eq!(replica.cells(), live.cells());
        assert_eq!(replica.text()[0], "shell prompt$ top");
    }
}
