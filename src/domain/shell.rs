//! A command (a program and its arguments, run without a shell) as a POSIX shell would
//! read it back: each word quoted where the shell would split or interpret it, so a person
//! or an agent who types what they are shown runs what hanarang runs.

/// `["sh", "-c", "cargo fmt --check && cargo test"]` → `sh -c 'cargo fmt --check && cargo test'`.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|word| shell_word(word))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One word, quoted when a shell would not read it back as it is.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,{}".contains(c))
        // bash expands `{a,b}` and `{1..3}`; a placeholder such as `{workdir}` stays.
        && !(word.contains('{') && (word.contains(',') || word.contains("..")));
    if plain {
        return word.to_string();
    }
    // Inside single quotes nothing is special but the quote itself, written '\''.
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(words: &[&str]) -> String {
        shell_line(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_shell_reads_back_what_is_shown() {
        assert_eq!(line(&["cargo", "test", "--quiet"]), "cargo test --quiet");
        assert_eq!(
            line(&["sh", "-c", "cargo fmt --check && cargo test"]),
            "sh -c 'cargo fmt --check && cargo test'"
        );
        assert_eq!(line(&["echo", "it's"]), "echo 'it'\\''s'");
        assert_eq!(line(&["printf", ""]), "printf ''");
        assert_eq!(
            line(&["a b", "$HOME", "*", "x;y"]),
            "'a b' '$HOME' '*' 'x;y'"
        );
    }
}
