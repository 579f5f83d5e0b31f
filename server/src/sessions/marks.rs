//! Shell-integration marks (OSC 133) in raw PTY output, found byte-exactly across chunk
//! boundaries: `A` prompt start, `B` prompt end, `C` command output start, `D[;status]`
//! command finished. What lies between C and D is a command's output, to the byte.

/// A piece of output: text as it came, or a mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a [u8]),
    Mark(Mark),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    PromptStart,
    PromptEnd,
    OutputStart,
    Finished(Option<i32>),
}

const PREFIX: &[u8] = b"\x1b]133;";
/// A mark longer than this is not one of ours: pass it on as text.
const MAX_MARK: usize = 64;

/// Splits output into text and marks. The start of a mark cut by a chunk boundary is held
/// back and completed by the next chunk; held bytes that turn out not to be a mark are text.
#[derive(Default)]
pub struct MarkScanner {
    held: Vec<u8>,
}

impl MarkScanner {
    pub fn scan(&mut self, chunk: &[u8], mut each: impl FnMut(Piece<'_>)) {
        if self.held.is_empty() {
            let held = split(chunk, &mut each);
            self.held.extend_from_slice(held);
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(chunk);
            let held = split(&joined, &mut each).to_vec();
            self.held = held;
        }
    }
}

/// Emits the pieces of `buf`; returns the unfinished tail that may still become a mark.
fn split<'a>(buf: &'a [u8], each: &mut impl FnMut(Piece<'_>)) -> &'a [u8] {
    let mut text_start = 0;
    let mut i = 0;
    while let Some(off) = buf[i..].iter().position(|&b| b == 0x1b) {
        let at = i + off;
        let rest = &buf[at..];
        if rest.len() < PREFIX.len() {
            if PREFIX.starts_with(rest) {
                flush(&buf[text_start..at], each);
                return rest;
            }
            break;
        }
        if !rest.starts_with(PREFIX) {
            i = at + 1;
            continue;
        }
        let body = &rest[PREFIX.len()..];
        // Terminated by BEL or ST (ESC \).
        let end = body.iter().position(|&b| b == 0x07 || b == 0x1b);
        match end {
            None if rest.len() <= MAX_MARK => {
                flush(&buf[text_start..at], each);
                return rest;
            }
            Some(e) if body[e] == 0x1b && body.len() == e + 1 && rest.len() <= MAX_MARK => {
                flush(&buf[text_start..at], each);
                return rest;
            }
            Some(e) if body[e] == 0x07 || body.get(e + 1) == Some(&b'\\') => {
                let len = PREFIX.len() + e + if body[e] == 0x07 { 1 } else { 2 };
                if let Some(mark) = parse(&body[..e]) {
                    flush(&buf[text_start..at], each);
                    each(Piece::Mark(mark));
                    text_start = at + len;
                }
                i = at + len;
            }
            _ => i = at + 1,
        }
    }
    flush(&buf[text_start..], each);
    &[]
}

fn flush(text: &[u8], each: &mut impl FnMut(Piece<'_>)) {
    if !text.is_empty() {
        each(Piece::Text(text));
    }
}

fn parse(body: &[u8]) -> Option<Mark> {
    let body = std::str::from_utf8(body).ok()?;
    let mut fields = body.split(';');
    Some(match fields.next()? {
        "A" => Mark::PromptStart,
        "B" => Mark::PromptEnd,
        "C" => Mark::OutputStart,
        "D" => Mark::Finished(fields.next().and_then(|s| s.parse().ok())),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]]) -> Vec<String> {
        let mut scanner = MarkScanner::default();
        let mut out = Vec::new();
        for c in chunks {
            scanner.scan(c, |p| {
                out.push(match p {
                    Piece::Text(t) => format!("text:{}", String::from_utf8_lossy(t)),
                    Piece::Mark(m) => format!("{m:?}"),
                })
            });
        }
        out
    }

    #[test]
    fn marks_split_text_exactly_even_across_chunk_boundaries() {
        let whole =
            b"\x1b]133;A\x07$ \x1b]133;B\x07ls\r\n\x1b]133;C\x07a b\r\n\x1b]133;D;3\x1b\\tail";
        let expect = [
            "PromptStart",
            "text:$ ",
            "PromptEnd",
            "text:ls\r\n",
            "OutputStart",
            "text:a b\r\n",
            "Finished(Some(3))",
            "text:tail",
        ];
        assert_eq!(run(&[whole]), expect);
        for cut in 1..whole.len() {
            let got = run(&[&whole[..cut], &whole[cut..]]);
            let joined: Vec<String> = merge_text(got);
            assert_eq!(
                joined,
                merge_text(expect.iter().map(|s| s.to_string()).collect()),
                "cut at {cut}"
            );
        }
    }

    /// Adjacent text pieces joined (a cut may split text in two).
    fn merge_text(pieces: Vec<String>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in pieces {
            match (out.last_mut(), p.strip_prefix("text:")) {
                (Some(last), Some(t)) if last.starts_with("text:") => last.push_str(t),
                _ => out.push(p),
            }
        }
        out
    }

    #[test]
    fn other_escapes_and_unknown_osc_stay_text() {
        assert_eq!(
            run(&[b"\x1b[1mbold\x1b]0;title\x07\x1b]133;Z\x07x"]),
            ["text:\x1b[1mbold\x1b]0;title\x07\x1b]133;Z\x07x"]
        );
        assert_eq!(run(&[b"\x1b]133;D\x07"]), ["Finished(None)"]);
    }
}
