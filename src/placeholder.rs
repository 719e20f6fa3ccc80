//! `{name}` placeholders in agent args and the branch template.
//!
//! A placeholder is `{` + lower-case letters/underscores + `}`; any other brace is literal,
//! so an inline JSON argument (a schema handed to an agent CLI) passes through untouched.
//! Values are substituted as whole strings: never split, never seen by a shell.

/// Placeholders an agent argument may use.
pub const SPAWN: &[&str] = &[
    "role",
    "contract",
    "workdir",
    "sprint",
    "run",
    "contract_file",
    "branch",
    "round",
    "attempt",
    "schema",
    "schema_file",
    "openai_schema_file",
    "reviewer",
    "plan_dir",
    "base_branch",
    "base_commit",
    "head",
    "artifact_dir",
];

/// The placeholder only `resume_args` may use besides the spawn's: the session it continues.
pub const SESSION: &str = "session";

/// Placeholders a role's prompt text may use (built-in or a project's `prompts/<actor>.md`).
pub const PROMPT: &[&str] = &[
    "role",
    "sister",
    "sprint",
    "goal",
    "project",
    "contract",
    "run",
    "workdir",
    "contract_file",
    "branch",
    "base_branch",
    "base_commit",
    "head",
    "artifact_dir",
    "plan_dir",
    "plan_place",
    "round",
    "attempt",
    "checklist",
    "instructions",
    "deploy",
    "check",
    "reviewer",
    "route",
];

/// Placeholders the branch template may use.
pub const BRANCH: &[&str] = &["sprint", "sprint_lower", "project"];

/// The placeholder names in `template`, in order.
pub fn names(template: &str) -> Vec<&str> {
    spans(template)
        .map(|(start, end)| &template[start + 1..end - 1])
        .collect()
}

/// The first placeholder in `template` that is not in `known`.
pub fn first_unknown<'a>(template: &'a str, known: &[&str]) -> Option<&'a str> {
    names(template).into_iter().find(|n| !known.contains(n))
}

/// Replaces every known placeholder with its value; unknown ones are left as written
/// (config validation refuses them before anything is spawned).
pub fn substitute(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut last = 0;
    for (start, end) in spans(template) {
        let name = &template[start + 1..end - 1];
        if let Some((_, value)) = values.iter().find(|(n, _)| *n == name) {
            out.push_str(&template[last..start]);
            out.push_str(value);
            last = end;
        }
    }
    out.push_str(&template[last..]);
    out
}

/// Byte ranges `[start, end)` of every `{name}` in `template`.
fn spans(template: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = template.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            if bytes[i] == b'{' {
                let start = i;
                let mut j = i + 1;
                while j < bytes.len() && (bytes[j].is_ascii_lowercase() || bytes[j] == b'_') {
                    j += 1;
                }
                if j > start + 1 && j < bytes.len() && bytes[j] == b'}' {
                    i = j + 1;
                    return Some((start, j + 1));
                }
            }
            i += 1;
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_whole_values_and_leaves_other_braces() {
        let out = substitute(
            "--workdir={workdir} {\"type\":\"object\"} {} {Role} {nope}",
            &[("workdir", "/tmp/a b; rm -rf $(x)")],
        );
        assert_eq!(
            out,
            "--workdir=/tmp/a b; rm -rf $(x) {\"type\":\"object\"} {} {Role} {nope}"
        );
    }

    #[test]
    fn finds_unknown_placeholders() {
        assert_eq!(names("{role}-{sprint}x{"), vec!["role", "sprint"]);
        assert_eq!(first_unknown("--role {role} {rol}", SPAWN), Some("rol"));
        assert_eq!(first_unknown("feature/{sprint_lower}", BRANCH), None);
    }

    #[test]
    fn a_value_containing_a_placeholder_is_not_expanded_again() {
        let out = substitute(
            "{sprint}:{role}",
            &[("sprint", "{role}"), ("role", "narang")],
        );
        assert_eq!(out, "{role}:narang");
    }
}
