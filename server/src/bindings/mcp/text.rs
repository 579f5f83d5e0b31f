//! Terminal bytes as an agent reads them, and keys as it names them: output becomes plain
//! text (no escapes, lines as the terminal shows them after carriage returns) cut to a bound
//! with a marker, and `Enter`, `C-c`, `Up`… become the bytes a terminal sends.

/// Text a tool result carries at most: the head and the tail, with the middle cut.
pub const MAX_TEXT: usize = 32 * 1024;
/// Of `MAX_TEXT`, what the head keeps (the tail, with the exit and errors, keeps the rest).
const HEAD: usize = 8 * 1024;

/// Terminal output as the plain text it shows: escape sequences removed, `\r\n` as `\n`,
/// and a line rewritten after a bare `\r` (progress bars) as its last rewrite.
pub fn plain(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    // A carriage return and a newline are single bytes in UTF-8, never inside a character
    // or an escape sequence; the escapes' stripper drops both, so lines are cut first.
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let shown = line.rsplit(|b| *b == b'\r').next().unwrap_or(line);
        out.push_str(&String::from_utf8_lossy(&strip_ansi_escapes::strip(shown)));
    }
    out
}

/// `text` within `MAX_TEXT` bytes: its head and tail around a marker that says how much was cut.
pub fn bounded(text: String) -> String {
    if text.len() <= MAX_TEXT {
        return text;
    }
    let head = floor_char(&text, HEAD);
    let tail = ceil_char(&text, text.len() - (MAX_TEXT - HEAD));
    let cut = tail - head;
    format!(
        "{}\n[… {cut} bytes cut …]\n{}",
        &text[..head],
        &text[tail..]
    )
}

/// The tail of `text` within `max` bytes (what `wait_for` shows of a long wait).
pub fn tail(text: &str, max: usize) -> &str {
    &text[ceil_char(text, text.len().saturating_sub(max))..]
}

/// Cuts `text` to its tail within `max` bytes.
pub fn keep_tail(text: &mut String, max: usize) {
    let cut = text.len() - tail(text, max).len();
    text.drain(..cut);
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The bytes for `keys`: each entry is a named key (`Enter`, `Tab`, `Esc`, `Space`,
/// `Backspace`, `Delete`, `Up`, `Down`, `Left`, `Right`, `Home`, `End`, `PageUp`,
/// `PageDown`, `C-a` … `C-z`, `C-[`, `C-\`, `C-]`) or else text typed as it is.
pub fn keys(keys: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for k in keys {
        match named(k) {
            Some(bytes) => out.extend_from_slice(bytes),
            None => out.extend_from_slice(k.as_bytes()),
        }
    }
    out
}

fn named(key: &str) -> Option<&'static [u8]> {
    const CONTROL: [&[u8]; 26] = [
        b"\x01", b"\x02", b"\x03", b"\x04", b"\x05", b"\x06", b"\x07", b"\x08", b"\x09", b"\x0a",
        b"\x0b", b"\x0c", b"\x0d", b"\x0e", b"\x0f", b"\x10", b"\x11", b"\x12", b"\x13", b"\x14",
        b"\x15", b"\x16", b"\x17", b"\x18", b"\x19", b"\x1a",
    ];
    Some(match key {
        "Enter" => b"\r",
        "Tab" => b"\t",
        "Esc" | "Escape" => b"\x1b",
        "Space" => b" ",
        "Backspace" => b"\x7f",
        "Delete" => b"\x1b[3~",
        "Up" => b"\x1b[A",
        "Down" => b"\x1b[B",
        "Right" => b"\x1b[C",
        "Left" => b"\x1b[D",
        "Home" => b"\x1b[H",
        "End" => b"\x1b[F",
        "PageUp" => b"\x1b[5~",
        "PageDown" => b"\x1b[6~",
        "C-[" => b"\x1b",
        "C-\\" => b"\x1c",
        "C-]" => b"\x1d",
        _ => {
            let letter = key.strip_prefix("C-")?;
            let [c] = letter.as_bytes() else { return None };
            let c = c.to_ascii_lowercase();
            c.is_ascii_lowercase()
                .then(|| CONTROL[usize::from(c - b'a')])?
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn plain_text_of_any_output_has_no_escape_and_no_carriage_return(
            bytes in prop::collection::vec(prop_oneof![any::<u8>(), Just(0x1b), Just(b'\r'), Just(b'[')], 0..512),
        ) {
            let text = plain(&bytes);
            prop_assert!(!text.contains('\x1b') && !text.contains('\r'), "{text:?}");
            prop_assert_eq!(text.matches('\n').count(), bytes.iter().filter(|b| **b == b'\n').count());
        }

        #[test]
        fn bounded_text_keeps_within_its_bound_and_whole_characters(text in ".{0,2000}", repeat in 1usize..40) {
            let text = text.repeat(repeat);
            let cut = bounded(text.clone());
            prop_assert!(cut.len() <= MAX_TEXT + 64);
            prop_assert_eq!(cut == text, text.len() <= MAX_TEXT);
        }
    }

    #[test]
    fn plain_text_has_no_escapes_and_shows_a_rewritten_line_as_its_last_rewrite() {
        let out = b"\x1b[1;31mred\x1b[0m\r\nstep 1\rstep 2\rdone\r\n\x1b]133;D;0\x07$ ";
        assert_eq!(plain(out), "red\ndone\n$ ");
    }

    #[test]
    fn long_text_keeps_its_head_and_tail_and_says_how_much_was_cut() {
        let text = format!(
            "{}{}{}",
            "a".repeat(HEAD),
            "m".repeat(100_000),
            "z".repeat(MAX_TEXT)
        );
        let cut = bounded(text);
        assert!(cut.starts_with(&"a".repeat(HEAD)));
        assert!(cut.ends_with(&"z".repeat(MAX_TEXT - HEAD)));
        let cut_bytes = 100_000 + HEAD;
        assert!(
            cut.contains(&format!("[… {cut_bytes} bytes cut …]")),
            "{}",
            &cut[HEAD..HEAD + 40]
        );
        assert_eq!(bounded("short".into()), "short");
        let mut seen = format!("{}é-end", "x".repeat(10));
        keep_tail(&mut seen, 6);
        assert_eq!(seen, "é-end");
        keep_tail(&mut seen, 5);
        assert_eq!(seen, "-end", "never half a character");
    }

    #[test]
    fn named_keys_become_terminal_bytes_and_other_entries_are_typed_as_text() {
        let k = |v: &[&str]| keys(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(k(&["ls -l", "Enter"]), b"ls -l\r");
        assert_eq!(
            k(&["C-c", "C-d", "Up", "Tab", "Esc"]),
            b"\x03\x04\x1b[A\t\x1b"
        );
        assert_eq!(k(&["C-"]), b"C-");
        assert_eq!(k(&["Enterprise"]), b"Enterprise");
    }
}
