//! What hanarang writes on the team's forge, where its people and its automation read it:
//! agent words there act on nothing — no mention, no closing keyword, no issue reference,
//! no link — and titles read as a maintainer would write them.

/// A zero-width space: invisible, and enough to keep the forge from reading what follows
/// it as a reference.
const BREAK: char = '\u{200B}';

/// The longest pull request title, as a maintainer keeps a commit's subject.
pub const MAX_TITLE: usize = 72;

/// `text` — the summary, its agent words already inert Markdown (`@` defused, a URL
/// escaped as `https\://`) — with nothing left that the forge acts on: an issue
/// reference (`#12`, `owner/repo#12`, `GH-12`, and so every closing keyword's) and an
/// escaped URL (an issue's address) are broken with a zero-width space. hanarang's own
/// links (unescaped) stay links.
pub fn defused(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for (i, &c) in chars.iter().enumerate() {
        out.push(c);
        let next = chars.get(i + 1).copied();
        let reference = match c {
            '#' => next.is_some_and(|n| n.is_ascii_digit()),
            // `GH-12`.
            'H' | 'h' => {
                i >= 1
                    && chars[i - 1].eq_ignore_ascii_case(&'g')
                    && next == Some('-')
                    && chars.get(i + 2).is_some_and(char::is_ascii_digit)
            }
            // `https\://`: a URL an agent wrote, escaped for Discord.
            ':' => {
                i >= 1 && chars[i - 1] == '\\' && chars.get(i + 1..i + 3) == Some(&['/', '/'][..])
            }
            _ => false,
        };
        if reference {
            out.push(BREAK);
        }
    }
    out
}

/// A pull request's title from the sprint's goal: its first sentence, at most
/// `MAX_TITLE` characters, cut at a word (never mid-word, no "…"), with no closing stop.
pub fn title(goal: &str) -> String {
    let line = goal
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let sentence = first_sentence(line);
    let mut title: String = match sentence.char_indices().nth(MAX_TITLE) {
        None => sentence.to_string(),
        Some((limit, _)) => {
            let head = &sentence[..limit];
            // The cut falls between words when the next character is a space.
            let at_word = sentence[limit..].starts_with(char::is_whitespace);
            match head.rfind(char::is_whitespace) {
                _ if at_word => head.to_string(),
                Some(space) if space > 0 => head[..space].to_string(),
                _ => head.to_string(),
            }
        }
    };
    while title.ends_with(|c: char| ".,;:-–—".contains(c) || c.is_whitespace()) {
        title.pop();
    }
    title
}

/// The text up to the end of its first sentence (a `.`, `!` or `?` before a space).
fn first_sentence(line: &str) -> &str {
    for (i, c) in line.char_indices() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let followed = line[i + c.len_utf8()..].starts_with(char::is_whitespace);
        let word = line[..i].rsplit(char::is_whitespace).next().unwrap_or("");
        // `e.g. `, `i.e. `: an abbreviation's stop ends no sentence.
        let abbreviation = c == '.' && word.contains('.');
        if followed && !abbreviation {
            // A question or an exclamation keeps its mark; a statement drops its stop.
            return match c {
                '.' => &line[..i],
                _ => &line[..i + 1],
            };
        }
    }
    line
}

/// The merge commit's message: hanarang's own words only — where the sprint's thread is,
/// the head that was reviewed, who approved — never the agents' commit subjects.
pub fn merge_body(sprint_id: &str, thread: Option<&str>, head: &str, approved_by: &str) -> String {
    let delivered = match thread {
        Some(url) => format!("Delivered by hanarang ({sprint_id}): {url}"),
        None => format!("Delivered by hanarang ({sprint_id})."),
    };
    format!("{delivered}\n\nReviewed-head: {head}\nApproved-by: {approved_by}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_escaped_links_are_broken_and_own_links_kept() {
        let text = "Closes #1, fixes #2; acme/app#3 and GH-4. See https\\://github.com/acme/app/issues/5 or https://discord.com/channels/1/2";
        let out = defused(text);
        for dead in ["#1", "#2", "app#3", "GH-4", "https\\://"] {
            assert!(!out.contains(dead), "{dead} still in {out:?}");
        }
        assert!(out.contains("https://discord.com/channels/1/2"), "{out}");
        assert_eq!(out.replace(BREAK, ""), text, "nothing else changes");
    }

    #[test]
    fn a_title_is_the_goals_first_sentence_cut_at_a_word() {
        assert_eq!(title("Add a login page. Then test it."), "Add a login page");
        assert_eq!(title("  \nFix the build!\nmore"), "Fix the build!");
        assert_eq!(title("Why does it crash? Find out."), "Why does it crash?");
        assert_eq!(title("Use e.g. a cache here"), "Use e.g. a cache here");
        let long = "Add windowed_by(iterable, size, key=None) to more_itertools: split an iterable of ordered values into windows";
        let t = title(long);
        assert!(t.chars().count() <= MAX_TITLE, "{t}");
        assert!(long.starts_with(&t) && !t.ends_with(':'), "{t}");
        assert!(long[t.len()..].starts_with(' '), "cut at a word: {t}");
        assert!(!t.contains('…'), "{t}");
        let word = "x".repeat(100);
        assert_eq!(title(&word).chars().count(), MAX_TITLE);
    }
}
