//! The patch a person approves from is what was committed: the bytes of each blob, as git
//! shows them from a git folder of hanarang's own over the repository's objects
//! (`Repo::view`): no attribute, textconv, external diff, config or replacement of the
//! agent's can hide or rewrite a line. Text is shown as text; a truly binary file (a NUL
//! byte in its first 8000 bytes, git's own rule, on the committed bytes) is named with
//! both sides' size and SHA-256.

use super::{ANSWER_CAP, GitError, Repo, View, failed};

/// How `git diff` is asked: the committed bytes, git's own prefixes, three lines of
/// context, no renames (each path on its own), full object ids (for the binary files'
/// facts).
const AS_COMMITTED: &[&str] = &[
    "diff",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "-U3",
];

/// The files `base..head` changes: `(path, lines added, lines removed)`; a binary file
/// counts no lines.
pub async fn diffstat(
    repo: &Repo,
    base: &str,
    head: &str,
) -> Result<Vec<(String, u64, u64)>, String> {
    let stat = async {
        let view = repo.view().await?;
        let mut args = AS_COMMITTED.to_vec();
        args.extend(["--numstat", "-z", base, head, "--"]);
        let (out, _) = repo.git_in(&view, &args, ANSWER_CAP).await?;
        Ok::<_, GitError>(
            String::from_utf8_lossy(&out)
                .split('\0')
                .filter_map(|entry| {
                    let mut parts = entry.splitn(3, '\t');
                    let added = parts.next()?.parse().unwrap_or(0);
                    let removed = parts.next()?.parse().unwrap_or(0);
                    Some((parts.next()?.to_string(), added, removed))
                })
                .collect(),
        )
    };
    stat.await
        .map_err(|e| failed(&format!("cannot compare {base}..{head}"), e))
}

/// The patch of `base..head`: git's patch of the committed bytes, each binary file's line
/// with its sides' size and hash. Past the answer cap the patch ends with a line saying it
/// was cut.
pub async fn patch(repo: &Repo, base: &str, head: &str) -> Result<String, String> {
    patch_of(repo, base, head, &[]).await
}

/// `patch`, of `paths` alone (every path when none is given).
pub async fn patch_of(
    repo: &Repo,
    base: &str,
    head: &str,
    paths: &[String],
) -> Result<String, String> {
    let made = async {
        let view = repo.view().await?;
        let mut args = AS_COMMITTED.to_vec();
        args.extend(["--full-index", base, head, "--"]);
        args.extend(paths.iter().map(String::as_str));
        let (out, cut) = repo.git_in(&view, &args, ANSWER_CAP).await?;
        let mut patch = named_binaries(repo, &view, out).await?;
        if cut {
            patch.extend_from_slice(
                format!(
                    "\n… the patch was cut here, at {} MiB: the rest is not shown\n",
                    ANSWER_CAP / (1024 * 1024)
                )
                .as_bytes(),
            );
        }
        Ok::<_, GitError>(String::from_utf8_lossy(&patch).into_owned())
    };
    made.await
        .map_err(|e| failed(&format!("cannot compare {base}..{head}"), e))
}

/// `patch` with each `Binary files … differ` line followed by what the two sides are:
/// `: absent → 2048 bytes, sha256 …`. Only a header line can start with `index ` or
/// `Binary files ` (every line of content starts with ` `, `+` or `-`).
async fn named_binaries(repo: &Repo, view: &View, patch: Vec<u8>) -> Result<Vec<u8>, GitError> {
    let lines: Vec<&[u8]> = patch.split_inclusive(|b| *b == b'\n').collect();
    let mut sides: Vec<(usize, [String; 2])> = Vec::new();
    let mut index: Option<[String; 2]> = None;
    for (at, line) in lines.iter().enumerate() {
        if let Some(ids) = line.strip_prefix(b"index ") {
            let ids = String::from_utf8_lossy(ids);
            let ids = ids.split_whitespace().next().unwrap_or_default();
            index = ids
                .split_once("..")
                .map(|(old, new)| [old.to_string(), new.to_string()]);
        } else if line.starts_with(b"diff --git ") {
            index = None;
        } else if line.starts_with(b"Binary files ")
            && let Some(ids) = index.take()
        {
            sides.push((at, ids));
        }
    }
    let absent = |id: &str| id.bytes().all(|b| b == b'0');
    let ids: Vec<String> = sides
        .iter()
        .flat_map(|(_, ids)| ids.iter())
        .filter(|id| !absent(id))
        .cloned()
        .collect();
    let blobs = repo.blobs(view, &ids).await?;
    let side = |id: &str| match ids.iter().position(|i| i == id) {
        Some(at) if !absent(id) => format!("{} bytes, sha256 {}", blobs[at].size, blobs[at].sha256),
        _ => "absent".to_string(),
    };
    let mut out = Vec::with_capacity(patch.len());
    for (at, line) in lines.iter().enumerate() {
        match sides.iter().find(|(binary, _)| *binary == at) {
            Some((_, [old, new])) => {
                out.extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
                out.extend_from_slice(format!(": {} → {}\n", side(old), side(new)).as_bytes());
            }
            None => out.extend_from_slice(line),
        }
    }
    Ok(out)
}
