//! Before the spawn: the run's files (contract, schema files), its arguments with their
//! placeholders, its environment and its prompt.

use super::launch::{Io, Launch};
use super::{RunOutcome, RunReport, RunRequest, render_prompt};
use crate::placeholder;

/// A run's files written (the contract, and the schema files its arguments name), its
/// command built and its prompt rendered: everything before the spawn.
#[derive(Debug)]
pub struct Prepared {
    pub(super) command: Launch,
    pub(super) prompt: String,
}

/// Writes the run's files and renders its arguments and prompt. The error is the run's
/// report (`spawn_failed`, saying which file or folder).
pub fn prepare(req: &RunRequest) -> Result<Prepared, Box<RunReport>> {
    let spec = &req.spec;
    let c = &req.contract;
    let contract_file = req.contract_path.display().to_string();
    let workdir = req.workdir.display().to_string();
    let round = c.round.to_string();
    let attempt = c.attempt.to_string();
    let schemas = match schema_inputs(req) {
        Ok(s) => s,
        Err(e) => {
            return Err(Box::new(RunReport::early(
                RunOutcome::SpawnFailed,
                format!("cannot write the schema files beside {contract_file}: {e}"),
            )));
        }
    };
    let values = [
        ("role", c.role.as_str()),
        ("contract", c.contract_id.as_str()),
        ("workdir", workdir.as_str()),
        ("sprint", c.sprint_id.as_str()),
        ("run", c.run_id.as_str()),
        ("contract_file", contract_file.as_str()),
        ("branch", c.branch.as_str()),
        ("round", round.as_str()),
        ("attempt", attempt.as_str()),
        ("schema", schemas.inline.as_str()),
        ("schema_file", schemas.file.as_str()),
        ("openai_schema_file", schemas.openai_file.as_str()),
        ("reviewer", spec.reviewer.as_deref().unwrap_or("")),
        ("plan_dir", c.plan_dir.as_str()),
        ("base_branch", c.base_branch.as_deref().unwrap_or("")),
        ("base_commit", c.base_commit.as_deref().unwrap_or("")),
        ("head", c.head.as_deref().unwrap_or("")),
        ("artifact_dir", c.artifact_dir.as_str()),
    ];
    let args: Vec<String> = spec
        .args
        .iter()
        .map(|a| placeholder::substitute(a, &values))
        .collect();

    if !req.workdir.is_dir() {
        return Err(Box::new(RunReport::early(
            RunOutcome::SpawnFailed,
            format!("the workdir {workdir} does not exist or is not a directory"),
        )));
    }
    if let Err(e) = write_contract(req) {
        return Err(Box::new(RunReport::early(
            RunOutcome::SpawnFailed,
            format!("cannot write the contract file {contract_file}: {e}"),
        )));
    }
    let prompt = render_prompt(c, &contract_file, req.role_text.as_deref());
    let mut command = Launch::new(&spec.program);
    command
        .args(&args)
        .current_dir(&req.workdir)
        .env_remove(&req.token_env)
        .envs(&spec.env)
        .env("HANARANG_SPRINT_ID", &c.sprint_id)
        .env("HANARANG_ROLE", c.role.as_str())
        .env("HANARANG_RUN_ID", &c.run_id)
        .env("HANARANG_CONTRACT_FILE", &contract_file)
        .env("HANARANG_ROUND", &round)
        .env("HANARANG_ATTEMPT", &attempt);
    if let Some(reviewer) = &spec.reviewer {
        command.env("HANARANG_REVIEWER", reviewer);
    }
    if let Some((name, email)) = &req.git_identity {
        command
            .env("GIT_AUTHOR_NAME", name)
            .env("GIT_AUTHOR_EMAIL", email)
            .env("GIT_COMMITTER_NAME", name)
            .env("GIT_COMMITTER_EMAIL", email);
    }
    command.stdin(Io::Piped).stdout(Io::Piped).stderr(Io::Piped);
    if let Some(fence) = &req.fence {
        let own = [contract_file.as_str(), &schemas.file, &schemas.openai_file]
            .into_iter()
            .filter(|f| !f.is_empty())
            .map(std::path::PathBuf::from)
            .collect::<Vec<_>>();
        if let Err(why) = fence.apply(&mut command, &own, &c.run_id) {
            return Err(Box::new(RunReport::early(RunOutcome::SpawnFailed, why)));
        }
    }
    Ok(Prepared { command, prompt })
}

/// What the schema placeholders stand for. The files are written (beside the contract
/// file) only when an argument uses them.
#[derive(Default)]
struct SchemaInputs {
    inline: String,
    file: String,
    openai_file: String,
}

fn schema_inputs(req: &RunRequest) -> std::io::Result<SchemaInputs> {
    use crate::handoff::schema::{Dialect, schema};
    let uses = |name: &str| {
        req.spec
            .args
            .iter()
            .any(|a| placeholder::names(a).contains(&name))
    };
    let actor = Some(req.contract.role);
    let dir = req.contract_path.parent().map_or_else(
        || std::path::PathBuf::from("."),
        std::path::Path::to_path_buf,
    );
    let mut out = SchemaInputs::default();
    let text = |dialect| {
        schema(actor, dialect)
            .map_err(std::io::Error::other)
            .and_then(|s| serde_json::to_string(&s).map_err(std::io::Error::other))
    };
    if uses("schema") {
        out.inline = text(Dialect::Draft07)?;
    }
    // Beside the contract file, named after it: `<sprint>.contract.json` →
    // `<sprint>.schema.json`, rewritten for each run as the contract file is.
    let contract_name = req
        .contract_path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("run.contract.json");
    let stem = contract_name
        .strip_suffix(".contract.json")
        .or_else(|| contract_name.strip_suffix(".json"))
        .unwrap_or(contract_name);
    for (name, suffix, dialect, slot) in [
        (
            "schema_file",
            "schema.json",
            Dialect::Draft07,
            &mut out.file,
        ),
        (
            "openai_schema_file",
            "schema.openai.json",
            Dialect::OpenaiStrict,
            &mut out.openai_file,
        ),
    ] {
        if uses(name) {
            std::fs::create_dir_all(&dir)?;
            let path = dir.join(format!("{stem}.{suffix}"));
            rewrite(&path, text(dialect)?.as_bytes())?;
            *slot = path.display().to_string();
        }
    }
    Ok(out)
}

fn write_contract(req: &RunRequest) -> std::io::Result<()> {
    if let Some(dir) = req.contract_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if !req.contract.artifact_dir.is_empty() {
        std::fs::create_dir_all(&req.contract.artifact_dir)?;
    }
    let json = serde_json::to_vec_pretty(&req.contract).map_err(std::io::Error::other)?;
    rewrite(&req.contract_path, &json)
}

/// Makes `bytes` the whole of the file at `path`. A sprint's runs rewrite the same files:
/// in place, since truncating a file frees its blocks, which on some file systems (ext4
/// mounted with `discard`) costs more than the rest of a spawn. Never through a link: a
/// symbolic link or a file with another name (an unfenced sister could have put one
/// there) is replaced by a new file, and what it pointed at is left alone. A FIFO is
/// written as the stream it is while something reads it, and replaced when nothing does
/// (a run's processes are gone by then): never a wait for a reader that cannot come.
fn rewrite(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
    let existing = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        // Cut to length after the write: truncating frees the file's blocks.
        .truncate(false)
        // A FIFO with no reader fails at once (ENXIO) instead of waiting for one.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match existing {
        Ok(file) => Some(file),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENXIO)) => None,
        Err(e) => return Err(e),
    };
    if let Some(mut file) = file {
        let kind = file.metadata()?;
        if kind.file_type().is_file() && kind.nlink() == 1 {
            file.write_all_at(bytes, 0)?;
            return file.set_len(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
        }
        if kind.file_type().is_fifo() {
            // SAFETY: F_SETFL with plain flags on a descriptor this function owns.
            unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_SETFL, 0) };
            return file.write_all(bytes);
        }
    }
    std::fs::remove_file(path)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?
        .write_all(bytes)
}

pub(super) fn spawn_error(program: &str, e: &std::io::Error) -> String {
    // A step before the program (its folder, cgroup, fence) says which it was.
    if e.get_ref().is_some() {
        return format!("cannot start {program:?}: {e}");
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("program not found: {program:?} (check agent.program and PATH)")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("program is not executable: {program:?} (permission denied)")
        }
        _ => format!("cannot start {program:?}: {e}"),
    }
}
