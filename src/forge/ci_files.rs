//! The files a forge runs: a change to one runs with the repository's secrets once it is
//! pushed (a branch of the repository itself), so it waits for a person's word first.

/// What every forge here (and the usual CI services a repository may hold) runs from the
/// tree, as globs: `**` any folders, `*` and `?` within a name.
pub const RUN_BY_FORGES: &[&str] = &[
    ".github/workflows/**",
    ".github/actions/**",
    ".forgejo/workflows/**",
    ".gitea/workflows/**",
    ".gitlab-ci.yml",
    ".gitlab/**",
    ".circleci/**",
    "Jenkinsfile",
    "azure-pipelines.yml",
    ".buildkite/**",
];

/// The paths of `changed` that a forge would run: those `RUN_BY_FORGES` or the project's
/// own `extra` globs match.
pub fn touched(changed: &[String], extra: &[String]) -> Vec<String> {
    changed
        .iter()
        .filter(|path| {
            RUN_BY_FORGES
                .iter()
                .copied()
                .chain(extra.iter().map(String::as_str))
                .any(|glob| matches(glob.as_bytes(), path.as_bytes()))
        })
        .cloned()
        .collect()
}

/// Whether `path` matches `glob`: `**` any run of characters (folders included), `*` any
/// within one name, `?` one character of a name; anything else itself.
fn matches(glob: &[u8], path: &[u8]) -> bool {
    match glob {
        [] => path.is_empty(),
        [b'*', b'*', rest @ ..] => {
            // `a/**/b` also matches `a/b`.
            let rest_after_slash = rest.strip_prefix(b"/").unwrap_or(rest);
            (0..=path.len()).any(|i| matches(rest, &path[i..]))
                || (rest_after_slash.len() < rest.len() && matches(rest_after_slash, path))
        }
        [b'*', rest @ ..] => {
            let name = path.iter().position(|&b| b == b'/').unwrap_or(path.len());
            (0..=name).any(|i| matches(rest, &path[i..]))
        }
        [b'?', rest @ ..] => path.first().is_some_and(|&b| b != b'/') && matches(rest, &path[1..]),
        [c, rest @ ..] => path.first() == Some(c) && matches(rest, &path[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<String> {
        list.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn the_files_forges_run_are_found_and_others_are_not() {
        let changed = paths(&[
            ".github/workflows/ci.yml",
            ".github/actions/setup/action.yml",
            ".gitlab-ci.yml",
            ".gitlab/ci/test.yml",
            "Jenkinsfile",
            "src/Jenkinsfile",
            ".github/CODEOWNERS",
            "src/workflows/ci.yml",
            "ci/deploy.sh",
            "ci/nested/run.sh",
        ]);
        assert_eq!(
            touched(&changed, &[]),
            paths(&[
                ".github/workflows/ci.yml",
                ".github/actions/setup/action.yml",
                ".gitlab-ci.yml",
                ".gitlab/ci/test.yml",
                "Jenkinsfile",
            ])
        );
        assert_eq!(
            touched(&changed, &["ci/*.sh".to_string()])
                .last()
                .map(String::as_str),
            Some("ci/deploy.sh"),
            "`*` stays within a name"
        );
        assert!(
            touched(&changed, &["ci/**/*.sh".to_string()]).contains(&"ci/nested/run.sh".into())
                && touched(&changed, &["ci/**/*.sh".to_string()]).contains(&"ci/deploy.sh".into()),
            "`**/` is any folders, none included"
        );
    }
}
