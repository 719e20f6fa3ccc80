//! The patch a person approves from is what was committed: the bytes of each blob, not
//! what the repository's attributes or config would make of them (a textconv, an external
//! diff, `-diff`, `binary`). Text is shown as text; a truly binary file (a NUL byte in its
//! first 8000 bytes, git's own rule, applied to the committed bytes) is named with its
//! size and SHA-256.

use super::git::{ANSWER_CAP, GitError, Repo, failed};

/// Paths per `git diff` call: the command line stays short whatever the sprint touched.
const PATHS_PER_CALL: usize = 200;

/// The mode of a file that is no file at all (absent on one side).
const ABSENT: &str = "000000";

/// How `git diff` is asked, whatever the repository's config says: the committed bytes as
/// text, its own prefixes, no renames (each path on its own), the whole repository.
const AS_COMMITTED: &[&str] = &[
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--text",
    "--no-renames",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "-O/dev/null",
];

/// One path `base..head` changes, as `git diff-tree` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    old_mode: String,
    new_mode: String,
    old_id: String,
    new_id: String,
    path: String,
}

impl Change {
    /// The blob ids of its sides that hold file bytes (a regular file or a symbolic link).
    fn blob_ids(&self) -> impl Iterator<Item = &String> {
        [
            (&self.old_mode, &self.old_id),
            (&self.new_mode, &self.new_id),
        ]
        .into_iter()
        .filter(|(mode, _)| mode.starts_with("10") || mode.starts_with("12"))
        .map(|(_, id)| id)
    }
}

/// The files `base..head` changes: `(path, lines added, lines removed)`; a binary file
/// counts no lines.
pub async fn diffstat(
    repo: &Repo,
    base: &str,
    head: &str,
) -> Result<Vec<(String, u64, u64)>, String> {
    let stat = async {
        let (_, binary) = committed(repo, base, head).await?;
        let mut args = vec!["diff", "--numstat", "-z"];
        args.extend_from_slice(AS_COMMITTED);
        let range = format!("{base}..{head}");
        args.extend([range.as_str(), "--"]);
        let out = repo.git(&args).await?;
        Ok(out
            .split('\0')
            .filter_map(|entry| {
                let mut parts = entry.splitn(3, '\t');
                let added = parts.next()?.parse().unwrap_or(0);
                let removed = parts.next()?.parse().unwrap_or(0);
                let path = parts.next()?.to_string();
                Some(match binary.iter().any(|(p, _)| *p == path) {
                    true => (path, 0, 0),
                    false => (path, added, removed),
                })
            })
            .collect())
    };
    stat.await
        .map_err(|e| failed(&format!("cannot compare {base}..{head}"), e))
}

/// The patch of `base..head`: git's text patch of the committed bytes, a line with size
/// and hash for each binary file, in git's order of paths. Past the answer cap the patch
/// ends with a line saying it was cut.
pub async fn patch(repo: &Repo, base: &str, head: &str) -> Result<String, String> {
    let mut patch = Vec::new();
    let made = async {
        let (changes, binary) = committed(repo, base, head).await?;
        let mut text_paths: Vec<&str> = Vec::new();
        for change in &changes {
            match binary.iter().find(|(path, _)| *path == change.path) {
                None => {
                    text_paths.push(&change.path);
                    if text_paths.len() == PATHS_PER_CALL {
                        text_patch(repo, base, head, &mut text_paths, &mut patch).await?;
                    }
                }
                Some((_, line)) => {
                    text_patch(repo, base, head, &mut text_paths, &mut patch).await?;
                    patch.extend_from_slice(binary_section(change, line).as_bytes());
                }
            }
            if patch.len() > ANSWER_CAP {
                break;
            }
        }
        text_patch(repo, base, head, &mut text_paths, &mut patch).await
    };
    made.await
        .map_err(|e| failed(&format!("cannot compare {base}..{head}"), e))?;
    if patch.len() > ANSWER_CAP {
        patch.truncate(ANSWER_CAP);
        patch.extend_from_slice(
            format!(
                "\n… the patch was cut at {} MiB; `git diff {base}..{head}` in the workdir has the rest\n",
                ANSWER_CAP / (1024 * 1024)
            )
            .as_bytes(),
        );
    }
    Ok(String::from_utf8_lossy(&patch).into_owned())
}

/// The paths `base..head` changes, and the binary ones among them with their line.
async fn committed(
    repo: &Repo,
    base: &str,
    head: &str,
) -> Result<(Vec<Change>, Vec<(String, String)>), GitError> {
    let changes = changes(repo, base, head).await?;
    let binary = binary_paths(repo, &changes).await?;
    Ok((changes, binary))
}

/// The paths `base..head` changes, with the modes and blobs of both sides.
async fn changes(repo: &Repo, base: &str, head: &str) -> Result<Vec<Change>, GitError> {
    let out = repo
        .git(&[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            base,
            head,
            "--",
        ])
        .await?;
    let mut changes = Vec::new();
    let mut fields = out.split('\0');
    while let Some(meta) = fields.next() {
        let Some(meta) = meta.strip_prefix(':') else {
            continue;
        };
        let Some(path) = fields.next() else { break };
        let parts: Vec<&str> = meta.split(' ').collect();
        if let [old_mode, new_mode, old_id, new_id, _status] = parts[..] {
            changes.push(Change {
                old_mode: old_mode.to_string(),
                new_mode: new_mode.to_string(),
                old_id: old_id.to_string(),
                new_id: new_id.to_string(),
                path: path.to_string(),
            });
        }
    }
    Ok(changes)
}

/// The binary paths among `changes`, each with its line: both sides' size and hash.
async fn binary_paths(repo: &Repo, changes: &[Change]) -> Result<Vec<(String, String)>, GitError> {
    let absent = |id: &String| id.bytes().all(|b| b == b'0');
    let ids: Vec<String> = changes
        .iter()
        .flat_map(Change::blob_ids)
        .filter(|id| !absent(id))
        .cloned()
        .collect();
    let blobs = repo.blobs(&ids).await?;
    let facts = |id: &String| ids.iter().position(|i| i == id).map(|at| &blobs[at]);
    let side = |id: &String| match facts(id) {
        Some(blob) if !absent(id) => format!("{} bytes, sha256 {}", blob.size, blob.sha256),
        _ => "absent".to_string(),
    };
    Ok(changes
        .iter()
        .filter(|c| c.blob_ids().any(|id| facts(id).is_some_and(|b| b.binary)))
        .map(|c| {
            let line = format!("{} → {}", side(&c.old_id), side(&c.new_id));
            (c.path.clone(), line)
        })
        .collect())
}

/// git's patch of the text files `paths` (emptied), appended to `patch`.
async fn text_patch<'a>(
    repo: &Repo,
    base: &'a str,
    head: &'a str,
    paths: &mut Vec<&'a str>,
    patch: &mut Vec<u8>,
) -> Result<(), GitError> {
    if paths.is_empty() {
        return Ok(());
    }
    let mut args = vec!["diff"];
    args.extend_from_slice(AS_COMMITTED);
    args.extend([base, head, "--"]);
    args.append(paths);
    let room = ANSWER_CAP.saturating_sub(patch.len()) + 1;
    let (out, _) = repo.git_bytes(&args, None, room).await?;
    patch.extend_from_slice(&out);
    Ok(())
}

/// A binary file's place in the patch, with git's header lines.
fn binary_section(change: &Change, line: &str) -> String {
    let path = shown(&change.path);
    let mut section = format!("diff --git a/{path} b/{path}\n");
    match (change.old_mode.as_str(), change.new_mode.as_str()) {
        (ABSENT, new) => section.push_str(&format!("new file mode {new}\n")),
        (old, ABSENT) => section.push_str(&format!("deleted file mode {old}\n")),
        (old, new) if old != new => {
            section.push_str(&format!("old mode {old}\nnew mode {new}\n"));
        }
        _ => {}
    }
    section.push_str(&format!("Binary file {path}: {line}\n"));
    section
}

/// A path as a line can show it: quoted when it holds a control character or a quote.
fn shown(path: &str) -> String {
    if path
        .chars()
        .any(|c| c.is_control() || c == '"' || c == '\\')
    {
        format!("{path:?}")
    } else {
        path.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_section_names_the_file_its_mode_and_both_sides() {
        let change = Change {
            old_mode: ABSENT.into(),
            new_mode: "100644".into(),
            old_id: "0".repeat(40),
            new_id: "ab".repeat(20),
            path: "img\n.png".into(),
        };
        assert_eq!(
            binary_section(&change, "absent → 3 bytes, sha256 x"),
            "diff --git a/\"img\\n.png\" b/\"img\\n.png\"\nnew file mode 100644\nBinary file \"img\\n.png\": absent → 3 bytes, sha256 x\n"
        );
    }
}
