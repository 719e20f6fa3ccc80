//! Text an agent wrote, made inert for Discord: shown as the characters it holds, never
//! as Markdown. What would link, format, hide or quote is escaped with a backslash (Discord,
//! as CommonMark, shows any punctuation after one as itself); what draws nothing or
//! reorders the line is shown as `<U+202E>`; mentions are defused. A bare URL is escaped
//! too (`https\://…`): Discord would link it, and the bot's message would vouch for it.

use crate::notify::messages::one_line;
use crate::output::invisible;

/// Agent text for a message (a card, the board, a line): inert, and unable to mention
/// anyone. Its line breaks stay.
pub fn text(agent: &str) -> String {
    no_pings(&file_text(agent))
}

/// Agent text on one line of the summary, exactly as written but for its line breaks and
/// tabs (each a space): no space is collapsed, nothing is cut short of `MAX_EXACT`; then
/// inert.
pub fn exact_line(agent: &str) -> String {
    const MAX_EXACT: usize = 1000;
    let flat: String = agent
        .trim_end_matches(['\n', '\r'])
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let flat = match flat.char_indices().nth(MAX_EXACT) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    };
    text(&flat)
}

/// Agent text for one line of a message: flattened and cut as the lines are
/// (`one_line`), then inert.
pub fn line(agent: &str) -> String {
    text(&one_line(agent))
}

/// Agent text for an attached file meant for reading (`review.md`): inert for Discord's
/// preview and for a Markdown viewer alike. A file pings no one, so an `@` stays as it is.
pub fn file_text(agent: &str) -> String {
    let chars: Vec<char> = agent.chars().collect();
    let mut out = String::with_capacity(agent.len() + agent.len() / 8);
    // Where the character stands in its line: blocks (a heading, a quote, a list) are
    // Markdown only at a line's start, after spaces; the text's own start counts as one,
    // since the bot may put it there.
    let mut at = At::LineStart;
    for (i, &c) in chars.iter().enumerate() {
        let next = chars.get(i + 1).copied();
        if c != '\n' && c != '\t' && (c.is_control() || invisible(c)) {
            out.push_str(&format!("<U+{:04X}>", u32::from(c)));
            at = At::Inside;
            continue;
        }
        let escape = match c {
            // Emphasis, bold, underline, strike, spoiler, code, a masked link, an
            // autolink or mention, and the escape itself: wherever they stand.
            '\\' | '*' | '_' | '~' | '|' | '`' | '[' | ']' | '<' => true,
            // A heading, subtext (`-#`), a quote, a list item, a setext underline.
            '#' | '>' | '-' | '+' | '=' => at == At::LineStart,
            // An ordered list item: `1. ` or `1) ` at a line's start.
            '.' | ')' if at == At::Digits => next.is_none_or(char::is_whitespace),
            // A bare URL (`https://…`), which Discord links.
            ':' => chars.get(i + 1..i + 3) == Some(&['/', '/'][..]),
            // A Markdown viewer's entities (`&#x202E;`) and `www.` links.
            '&' => next.is_some_and(|n| n == '#' || n.is_ascii_alphabetic()),
            '.' => i >= 3 && starts_www(&chars[..i]),
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
        at = match c {
            '\n' => At::LineStart,
            ' ' | '\t' if at == At::LineStart => At::LineStart,
            '0'..='9' if matches!(at, At::LineStart | At::Digits) => At::Digits,
            _ => At::Inside,
        };
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// Only spaces since the line began.
    LineStart,
    /// Only spaces, then digits.
    Digits,
    Inside,
}

/// Whether `before` ends with `www` where a viewer's link may start (the line's start,
/// after white space or `(`, as GitHub's Markdown has it): a `.` after it makes the link.
fn starts_www(before: &[char]) -> bool {
    let n = before.len();
    before[n - 3..].iter().all(|c| c.eq_ignore_ascii_case(&'w'))
        && (n == 3 || before[n - 4].is_whitespace() || "(*_~".contains(before[n - 4]))
}

/// Text that cannot mention anyone even where mentions would be allowed: every `@` is
/// followed by a zero-width space (the bot's own, so not shown escaped).
fn no_pings(text: &str) -> String {
    text.replace('@', "@\u{200B}")
}

/// What Discord would make live in `text`, roughly: each construct whose opening
/// characters stand unescaped (the bot's own bold and code spans included), and any
/// invisible character but the zero-width space after an `@`. For the tests (feature
/// `testing`) of what shows agent text.
#[cfg(any(test, feature = "testing"))]
pub fn live(text: &str) -> Vec<&'static str> {
    let unescaped = |pattern: &str| {
        text.match_indices(pattern).any(|(i, _)| {
            let backslashes = text[..i].chars().rev().take_while(|&c| c == '\\').count();
            backslashes % 2 == 0
        })
    };
    let mut found = Vec::new();
    for (pattern, what) in [
        ("](", "a masked link"),
        ("**", "bold"),
        ("__", "underline"),
        ("~~", "strike"),
        ("||", "a spoiler"),
        ("`", "code"),
        ("<http", "an autolink"),
        ("://", "a bare URL"),
        ("<@", "a mention"),
        ("@everyone", "a mention"),
    ] {
        if unescaped(pattern) {
            found.push(what);
        }
    }
    for line in text.lines() {
        let line = line.trim_start();
        if ["#", ">", "-", "+", "="]
            .iter()
            .any(|m| line.starts_with(m))
        {
            found.push("a block at a line's start");
        }
        if line.starts_with(|c: char| c.is_ascii_digit())
            && line
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .starts_with(". ")
        {
            found.push("an ordered list");
        }
    }
    let without_defused = text.replace("@\u{200B}", "@");
    if without_defused
        .chars()
        .any(|c| c != '\n' && c != '\t' && (c.is_control() || invisible(c)))
    {
        found.push("an invisible character");
    }
    found
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_of_the_summary_keeps_its_spaces_and_backticks_exactly() {
        assert_eq!(
            super::exact_line("test `[  Kebab case]` stays\n"),
            "test \\`\\[  Kebab case\\]\\` stays"
        );
        assert_eq!(super::exact_line("a\tb\nc"), "a b c");
    }

    use super::*;

    #[test]
    fn a_masked_link_is_shown_as_its_text_not_made() {
        let shown = text("[Approve here](https://evil.example/approve)");
        assert_eq!(shown, "\\[Approve here\\](https\\://evil.example/approve)");
        assert_eq!(live(&shown), Vec::<&str>::new());
        assert_eq!(
            live("[Approve here](https://evil.example/approve)"),
            ["a masked link", "a bare URL"]
        );
    }

    #[test]
    fn bold_underline_strike_and_emphasis_are_escaped() {
        let shown = text("**LGTM** __ok__ ~~no~~ *yes* _x_");
        assert_eq!(
            shown,
            "\\*\\*LGTM\\*\\* \\_\\_ok\\_\\_ \\~\\~no\\~\\~ \\*yes\\* \\_x\\_"
        );
        assert!(live(&shown).is_empty(), "{:?}", live(&shown));
    }

    /// A spoiler opened in one field and closed in another is two escaped halves.
    #[test]
    fn a_spoiler_split_across_two_fields_hides_nothing() {
        let card = format!(
            "✅ {}\n**Check**: passed\n`abc1234` {}",
            line("item ||"),
            line("|| subject")
        );
        assert_eq!(
            card,
            "✅ item \\|\\|\n**Check**: passed\n`abc1234` \\|\\| subject"
        );
        assert!(!live(&card).contains(&"a spoiler"));
    }

    #[test]
    fn autolinks_bare_urls_and_mentions_are_text() {
        let shown = text("<https://x.example> https://y.example <@123> <@&4> @everyone <t:1:R>");
        assert_eq!(
            shown,
            "\\<https\\://x.example> https\\://y.example \\<@\u{200B}123> \\<@\u{200B}&4> @\u{200B}everyone \\<t:1:R>"
        );
        assert!(live(&shown).is_empty(), "{:?}", live(&shown));
        // A viewer of `review.md` links `www.` and reads entities; Discord does neither.
        assert_eq!(
            file_text("www.evil.example (WWW.x a.www.b &#x202E; &amp; R&D @here"),
            "www\\.evil.example (WWW\\.x a.www.b \\&#x202E; \\&amp; R\\&D @here"
        );
    }

    #[test]
    fn headings_quotes_lists_and_subtext_at_a_lines_start_are_escaped() {
        let shown = text(
            "# heading\n  > quote\n>>> all\n- item\n-# small\n+ plus\n12. tenth\n3) third\n===",
        );
        assert_eq!(
            shown,
            "\\# heading\n  \\> quote\n\\>>> all\n\\- item\n\\-# small\n\\+ plus\n12\\. tenth\n3\\) third\n\\==="
        );
        assert!(live(&shown).is_empty(), "{:?}", live(&shown));
        // Inside a line they are only punctuation, and stay as they are.
        assert_eq!(
            text("a # b > c - d 1. e a-b v1.2 (x)"),
            "a # b > c - d 1. e a-b v1.2 (x)"
        );
    }

    #[test]
    fn a_code_fence_is_shown_with_its_backticks() {
        let shown = text("```\nrm -rf /\n```");
        assert_eq!(shown, "\\`\\`\\`\nrm -rf /\n\\`\\`\\`");
        assert!(live(&shown).is_empty());
        // An escape the agent wrote escapes nothing of the bot's: it is doubled.
        assert_eq!(text("x\\"), "x\\\\");
        assert_eq!(format!("**{}**", text("x\\")), "**x\\\\**");
    }

    #[test]
    fn bidi_zero_width_and_tag_characters_are_shown_as_escapes() {
        let shown = text("evil\u{202E}gnp.exe a\u{200B}b\u{200D}c\u{2066}d\u{61C}e\u{FEFF}");
        assert_eq!(
            shown,
            "evil<U+202E>gnp.exe a<U+200B>b<U+200D>c<U+2066>d<U+061C>e<U+FEFF>"
        );
        // Text hidden in tag characters, and the separators a line would break on.
        assert_eq!(
            text("ok\u{E0001}\u{E0041}\u{E007F}\u{2028}\u{2029}\r\u{1b}[2K"),
            "ok<U+E0001><U+E0041><U+E007F><U+2028><U+2029><U+000D><U+001B>\\[2K"
        );
        assert!(live(&shown).is_empty());
        // One line flattens a separator into a space, as it does any line break.
        assert_eq!(line("a\u{2028}b\n\nc"), "a b c");
    }

    #[test]
    fn plain_text_is_kept_exactly() {
        for plain in [
            "validate the password length",
            "  two  spaces\tand a tab  ",
            "✏️ Edit src/로그인.rs · ▶️ cargo test -q",
            "fix: the login page (issue 12), v1.2.3 — 100% done!",
        ] {
            assert_eq!(text(plain), plain);
        }
        // A word a Markdown reader would join is escaped; it reads the same.
        assert_eq!(text("src/my_file.rs"), "src/my\\_file.rs");
    }
}
