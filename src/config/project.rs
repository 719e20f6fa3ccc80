//! `[projects.NAME]`: the workdir and the project's recipe (SPEC §12): its branches, where
//! the plan goes, its own check, the texts its sisters are given. Checked here too.

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectConfig {
    /// The repository the sisters work in. A relative path is taken from the config
    /// file's directory.
    pub workdir: PathBuf,
    /// The branch a sprint starts from; unset, the one checked out in the workdir.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// Where harang writes the plan, relative to the workdir, with the branch
    /// template's placeholders.
    #[serde(default = "default_plan_dir")]
    pub plan_dir: String,
    /// The project's own check: a program and its arguments, never a shell line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check: Vec<String>,
    #[serde(default = "default_check_timeout")]
    pub check_timeout: Dur,
    /// A file whose text every sister's prompt carries; relative to the workdir, and read
    /// only inside it (`read_inside`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<PathBuf>,
    /// What deploying means for this project, for erang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<String>,
    /// A folder of `<actor>.md` files replacing the built-in role text; relative to the
    /// config file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<PathBuf>,
}

impl ProjectConfig {
    /// A project that is only a workdir: every recipe key at its default.
    pub fn at(workdir: PathBuf) -> ProjectConfig {
        ProjectConfig {
            workdir,
            base_branch: None,
            plan_dir: default_plan_dir(),
            check: Vec::new(),
            check_timeout: default_check_timeout(),
            instructions: None,
            deploy: None,
            prompts: None,
        }
    }

    /// The plan folder of `sprint`, absolute: the workdir joined with `plan_dir`.
    pub fn plan_dir_of(&self, sprint: &str, project: &str) -> PathBuf {
        let lower = sprint.to_lowercase();
        let rendered = crate::placeholder::substitute(
            &self.plan_dir,
            &[
                ("sprint", sprint),
                ("sprint_lower", lower.as_str()),
                ("project", project),
            ],
        );
        self.workdir.join(rendered)
    }

    /// The project's file replacing `actor`'s built-in role text, when its `prompts`
    /// folder has one.
    pub fn prompt_file(&self, actor: Actor) -> Option<PathBuf> {
        let path = self.prompts.as_ref()?.join(format!("{actor}.md"));
        path.is_file().then_some(path)
    }

    /// The text of the `instructions` file: a file of the workdir, read as a sister
    /// could open it (`read_inside`), `key` naming it in a refusal.
    pub fn read_instructions(&self, key: &str, own: &[PathBuf]) -> Option<Result<String, Refused>> {
        let path = self.instructions.as_ref()?;
        Some(read_inside(&self.workdir, path, key, own, MAX_RECIPE_BYTES))
    }

    /// The text of one of the `prompts` files: the operator's, beside the config; but one
    /// that lies in the workdir is the agents' to change, and is read as the workdir's
    /// files are (`read_inside`).
    pub fn read_prompt(&self, path: &Path, key: &str, own: &[PathBuf]) -> Result<String, Refused> {
        if let Some(inside) = self.in_workdir(path) {
            return read_inside(&self.workdir, &inside, key, own, MAX_RECIPE_BYTES);
        }
        std::fs::read_to_string(path).map_err(|e| Refused {
            key: key.to_string(),
            reason: format!("cannot read {}: {e}", path.display()),
        })
    }

    /// `path` as a path in the workdir, written there or leading there.
    fn in_workdir(&self, path: &Path) -> Option<PathBuf> {
        if path.starts_with(&self.workdir) {
            return Some(path.to_path_buf());
        }
        let resolved = std::fs::canonicalize(path).ok()?;
        let root = std::fs::canonicalize(&self.workdir).ok()?;
        resolved.starts_with(&root).then_some(resolved)
    }
}

pub(super) fn default_plan_dir() -> String {
    ".plans/{sprint_lower}".into()
}

pub(super) fn default_check_timeout() -> Dur {
    Dur(Duration::from_secs(30 * 60))
}

/// What is wrong with a project's recipe keys (SPEC §12), as (key, reason); `own` are
/// hanarang's files, which a recipe file must not be.
pub(super) fn project_recipe(
    project: &ProjectConfig,
    own: &[PathBuf],
) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    if project
        .base_branch
        .as_deref()
        .is_some_and(|b| b.trim().is_empty())
    {
        problems.push(("base_branch", "must not be empty".to_string()));
    }
    if project.plan_dir.trim().is_empty() {
        problems.push(("plan_dir", "must not be empty".to_string()));
    } else if Path::new(&project.plan_dir).is_absolute() {
        problems.push((
            "plan_dir",
            format!("{:?} must be relative to the workdir", project.plan_dir),
        ));
    } else if let Some(name) = placeholder::first_unknown(&project.plan_dir, placeholder::BRANCH) {
        problems.push(("plan_dir", unknown_placeholder(name, placeholder::BRANCH)));
    }
    if project.check.first().is_some_and(|p| p.trim().is_empty()) {
        problems.push((
            "check",
            "the first item is the program to run and must not be empty".to_string(),
        ));
    }
    if project.check_timeout.0.is_zero() {
        problems.push(("check_timeout", "must be longer than zero".to_string()));
    }
    if let Some(file) = &project.instructions {
        if std::fs::symlink_metadata(file).is_err() {
            problems.push(("instructions", format!("no file {}", file.display())));
        } else if let Some(Err(refused)) = project.read_instructions("instructions", own) {
            problems.push(("instructions", refused.reason));
        }
    }
    if project
        .deploy
        .as_deref()
        .is_some_and(|d| d.trim().is_empty())
    {
        problems.push(("deploy", "must not be empty".to_string()));
    }
    if let Some(folder) = &project.prompts {
        if !folder.is_dir() {
            problems.push(("prompts", format!("no folder {}", folder.display())));
        }
        for actor in Actor::ALL {
            let Some(path) = project.prompt_file(actor) else {
                continue;
            };
            match project.read_prompt(&path, "prompts", own) {
                Err(refused) => problems.push(("prompts", refused.reason)),
                Ok(text) => {
                    if let Some(name) = placeholder::first_unknown(&text, placeholder::PROMPT) {
                        problems.push((
                            "prompts",
                            format!(
                                "{}: {}",
                                path.display(),
                                unknown_placeholder(name, placeholder::PROMPT)
                            ),
                        ));
                    }
                }
            }
        }
    }
    problems
}
