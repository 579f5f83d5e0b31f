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

/// Feeds every byte to the emulator, with no skipping: what `feed` must equal.
fn feed_all(s: &mut Screen, bytes: &[u8]) {
    let (_, rows) = s.size;
    s.tracker.feed(bytes, rows);
    let text = decode_utf8_stream(&mut s.pending, bytes);
    s.vt().feed(text.as_str());
}

#[test]
fn a_flood_of_plain_lines_lands_exactly_as_if_every_byte_were_fed() {
    use rand::{Rng, SeedableRng};
    const SNIPPETS: &[&str] = &[
        "\x1b[31m",
        "\x1b[0m",
        "\x1b[1;44m",
        "\x1b[2J",
        "\x1b[H",
        "\x1b[4;7H",
        "\x1b[K",
        "\x1b[3;6r",
        "\x1b[r",
        "\x1b[2;0r",
        "\x1b[0;0r",
        "\x1b[3:1r",
        "\x1b[?1049h",
        "\x1b[?1049l",
        "\x1b[4h",
        "\x1b[4l",
        "\x1b[20h",
        "\x1b[20l",
        "\x1b[?7l",
        "\x1b[?7h",
        "\x1b(0",
        "\x1b(B",
        "\x1b]0;title\x07",
        "\x1b]0;never ended ",
        "\x1bP1$r",
        "\x1b\\",
        "\x1b[?6h",
        "\x1b[?6l",
        "\x1bc",
        "\x1b[!p",
        "\u{9b}2J",
        "\u{9d}0;c1 title",
        "\u{9c}",
        "\x18",
        "\u{e9}t\u{e9}",
        "\u{4e2d}\u{6587}",
        "\x1b[3",
        "8;5;1",
        "m",
        "\x1b",
        "[",
        "\x1b[?1000h",
        "\x1b[?2004h",
        "\x1b7",
        "\x1b8",
        "\x1bM",
        "\x1b[5S",
        "\x1b[2T",
        "\x1b[L",
        "\x1b[3M",
        "\r",
        "\n",
        "\x1b[?1;2r",
    ];
    // Characters beyond ASCII: accented, wide, astral and combining.
    const WIDE: &[&str] = &["\u{e9}", "\u{4e2d}", "\u{2192}", "\u{1f600}", "\u{301}"];
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let mut skipped = 0;
    for round in 0..300 {
        let (cols, rows) = (rng.random_range(4..90u16), rng.random_range(2..26u16));
        let (mut fast, mut all) = (Screen::new(cols, rows), Screen::new(cols, rows));
        for step in 0..40 {
            let mut chunk = Vec::new();
            if rng.random_bool(0.5) {
                for _ in 0..rng.random_range(0..4) {
                    chunk.extend_from_slice(
                        SNIPPETS[rng.random_range(0..SNIPPETS.len())].as_bytes(),
                    );
                }
            } else {
                for _ in 0..rng.random_range(0..(4 * usize::from(rows) + 10)) {
                    for _ in 0..rng.random_range(0..(2 * usize::from(cols))) {
                        match rng.random_range(0..40) {
                            0 => chunk.push(b'\t'),
                            1 => chunk.push(0x08),
                            2 => chunk.push(b'\r'),
                            3 => chunk.extend_from_slice(
                                WIDE[rng.random_range(0..WIDE.len())].as_bytes(),
                            ),
                            _ => chunk.push(rng.random_range(0x20..0x7f)),
                        }
                    }
                    chunk.extend_from_slice(if rng.random_bool(0.9) { b"\r\n" } else { b"\n" });
                }
                // Now and then a byte that is not UTF-8, or a C1 control (CSI, SGR red).
                for odd in [&b"\xff"[..], b"\xc2\x9b31m"] {
                    if rng.random_bool(0.1) {
                        let at = rng.random_range(0..=chunk.len());
                        chunk.splice(at..at, odd.iter().copied());
                    }
                }
            }
            if rng.random_bool(0.05) {
                let (c, r) = (rng.random_range(4..90u16), rng.random_range(2..26u16));
                fast.resize(c, r);
                all.resize(c, r);
            }
            // Reads split characters as well as lines.
            let split = rng.random_range(0..=chunk.len());
            for part in [&chunk[..split], &chunk[split..]] {
                fast.feed(part);
                feed_all(&mut all, part);
            }
            skipped += usize::from(fast.owed_blank);
            // The screen is not read after every chunk, so floods accumulate.
            if rng.random_bool(0.3) || step == 39 {
                assert_eq!(
                    String::from_utf8_lossy(&fast.snapshot()),
                    String::from_utf8_lossy(&all.snapshot()),
                    "round {round} step {step}: {:?}",
                    String::from_utf8_lossy(&chunk)
                );
            }
        }
    }
    assert!(skipped > 2000, "the skip ran {skipped} times");
}

#[test]
fn only_whole_screenfuls_of_plain_lines_are_skipped() {
    let lines = |n: usize| "0123456789\r\n".repeat(n).into_bytes();
    // 5 rows: more than 5 line feeds before the cut and 5 after it.
    assert_eq!(scrolled_off(&lines(11), 5), Some(12 * 6));
    assert_eq!(scrolled_off(&lines(10), 5), None);
    assert!(plain(&lines(40)));
    assert!(!plain(b"red \x1b[31m"));
    assert!(plain("caf\u{e9} \u{4e2d}\u{6587} \u{1f600}".as_bytes()));
    assert!(plain(b"invalid \xff\xe2\x82 but printed"));
    assert!(!plain("C1 CSI \u{9b}2J".as_bytes()));
    assert!(!plain(b"may start a C1 \xc2"));
    // A scroll region, or a chunk that starts inside a string, feeds every byte.
    let mut t = Tracker::default();
    t.feed(b"\x1b[2;4r", 5);
    assert!(!t.quiet());
    t.feed(b"\x1b[r", 5);
    assert!(t.quiet());
    t.feed(b"\x1b]0;title", 5);
    assert!(!t.quiet());
    t.feed(b"\x07", 5);
    assert!(t.quiet());
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

#[test]
fn a_compacted_screen_comes_back_cell_for_cell_and_goes_on_as_if_it_never_left() {
    let (mut kept, mut compacted) = (Screen::new(40, 10), Screen::new(40, 10));
    for s in [&mut kept, &mut compacted] {
        s.feed(b"\x1b[4;20r\x1b[3g\x1b[10G\x1bH\x1b[7m\x1b7");
        s.feed(FULL_SCREEN_APP);
    }
    compacted.compact();
    assert!(compacted.vt.is_none(), "the emulator is let go");
    assert_eq!(
        compacted.snapshot(),
        kept.snapshot(),
        "a keyframe needs no restore"
    );
    assert!(compacted.vt.is_none());
    for s in [&mut kept, &mut compacted] {
        s.feed(b"\x1b[3;1H\r\nmore\tlines\r\n\x1b8scroll\x1b[?1049l\tx\x1b[23;1Hend\r\n");
    }
    assert_eq!(compacted.cells(), kept.cells());
    assert_eq!(compacted.cursor(), kept.cursor());
    assert_eq!(compacted.text(), kept.text());
    assert_eq!(compacted.snapshot(), kept.snapshot());
}
