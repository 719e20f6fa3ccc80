//! `[projects.NAME]`: the workdir and the project's recipe: its branches, where
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
    /// Where the planner writes the plan, when the project keeps plans in its tree:
    /// relative to the workdir, with the branch template's placeholders. Unset, the plan
    /// lives in the sprint's folder outside the repository and is never committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_dir: Option<String>,
    /// The project's own check: a program and its arguments, never a shell line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check: Vec<String>,
    #[serde(default = "default_check_timeout")]
    pub check_timeout: Dur,
    /// Whether the check is run once at the sprint's base commit too, so the sisters and
    /// the person know what it said before the sprint (`false`: a check too slow to run
    /// twice).
    #[serde(default = "default_check_base", skip_serializing_if = "is_true")]
    pub check_base: bool,
    /// A file whose text every sister's prompt carries; relative to the workdir, and read
    /// only inside it (`read_inside`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<PathBuf>,
    /// What deploying means for this project, for the deployer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<String>,
    /// A folder of `<actor>.md` files replacing the built-in role text; relative to the
    /// config file. One that lies in a workdir is read as its files are (`read_prompt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<PathBuf>,
    /// Delivery through the project's code forge: a pull request, merged on approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge: Option<ForgeConfig>,
}

impl ProjectConfig {
    /// A project that is only a workdir: every recipe key at its default.
    pub fn at(workdir: PathBuf) -> ProjectConfig {
        ProjectConfig {
            workdir,
            base_branch: None,
            plan_dir: None,
            check: Vec::new(),
            check_timeout: default_check_timeout(),
            check_base: default_check_base(),
            instructions: None,
            deploy: None,
            prompts: None,
            forge: None,
        }
    }

    /// The plan folder of `sprint`, absolute: the workdir joined with `plan_dir` when the
    /// project keeps plans in its tree, else the sprint's own folder beside its runs
    /// (`<runs>/SPRINT-NNN/plan`).
    pub fn plan_dir_of(&self, sprint: &str, project: &str, runs: &Path) -> PathBuf {
        let Some(template) = &self.plan_dir else {
            return plan_outside(runs, sprint);
        };
        let lower = sprint.to_lowercase();
        let rendered = crate::placeholder::substitute(
            template,
            &[
                ("sprint", sprint),
                ("sprint_lower", lower.as_str()),
                ("project", project),
            ],
        );
        self.workdir.join(rendered)
    }

    /// Whether the plan is a file of the repository, committed with the change.
    pub fn plans_in_tree(&self) -> bool {
        self.plan_dir.is_some()
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
    /// in a workdir (this project's or another of `workdirs`) is the agents' to change,
    /// and is read as the workdir's files are (`read_inside`). Where the folder lies is
    /// decided now, on its canonical path: spelled through `..` or a link, a folder in a
    /// workdir is still in it.
    pub fn read_prompt(
        &self,
        path: &Path,
        key: &str,
        own: &[PathBuf],
        workdirs: &[&Path],
    ) -> Result<String, Refused> {
        let refused = |reason: String| Refused::new(key, reason);
        let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(refused(format!("{} is not a file", path.display())));
        };
        let folder = std::fs::canonicalize(folder)
            .map_err(|e| refused(format!("cannot read {}: {e}", folder.display())))?;
        // A workdir that cannot be resolved holds no file to be read here.
        let roots: Vec<PathBuf> = std::iter::once(self.workdir.as_path())
            .chain(workdirs.iter().copied())
            .filter_map(|w| std::fs::canonicalize(w).ok())
            .collect();
        match roots.iter().find(|root| folder.starts_with(root)) {
            Some(root) => read_inside(root, &folder.join(name), key, own, MAX_RECIPE_BYTES),
            None => read_operators(&folder.join(name), &roots, key, own, MAX_RECIPE_BYTES),
        }
    }
}

/// A sprint's plan folder outside the repository: read by its every run, written by its
/// planner's (the fence grants it so), never in the team's tree.
pub fn plan_outside(runs: &Path, sprint: &str) -> PathBuf {
    runs.join(sprint).join("plan")
}

fn default_check_base() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

pub(super) fn default_check_timeout() -> Dur {
    Dur(Duration::from_secs(30 * 60))
}

/// What is wrong with a project's recipe keys, as (key, reason); `own` are
/// hanarang's files, which a recipe file must not be; `workdirs` every project's.
pub(super) fn project_recipe(
    project: &ProjectConfig,
    own: &[PathBuf],
    workdirs: &[&Path],
) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    if project
        .base_branch
        .as_deref()
        .is_some_and(|b| b.trim().is_empty())
    {
        problems.push(("base_branch", "must not be empty".to_string()));
    }
    match project.plan_dir.as_deref() {
        None => {}
        Some(dir) if dir.trim().is_empty() => {
            problems.push((
                "plan_dir",
                "must not be empty (leave it out to keep plans outside the repository)".to_string(),
            ));
        }
        Some(dir) if Path::new(dir).is_absolute() => {
            problems.push((
                "plan_dir",
                format!("{dir:?} must be relative to the workdir"),
            ));
        }
        Some(dir)
            if Path::new(dir)
                .components()
                .any(|c| c == std::path::Component::ParentDir) =>
        {
            problems.push((
                "plan_dir",
                format!(
                    "{dir:?} leaves the workdir (`..`): a plan kept in the tree is a folder of it; leave plan_dir out to keep plans outside the repository"
                ),
            ));
        }
        Some(dir) => {
            if let Some(name) = placeholder::first_unknown(dir, placeholder::BRANCH) {
                problems.push(("plan_dir", unknown_placeholder(name, placeholder::BRANCH)));
            }
        }
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
            match project.read_prompt(&path, "prompts", own, workdirs) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A config's folder with the operator's prompts, a project's workdir with a prompts
    /// folder of its own, and another project's workdir.
    struct Dirs {
        base: PathBuf,
        config: PathBuf,
        work: PathBuf,
        other: PathBuf,
    }

    impl Dirs {
        fn new(label: &str) -> Dirs {
            let base = std::env::temp_dir()
                .join(format!("hanarang-prompts-{label}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&base);
            let (etc, work, other) = (base.join("etc"), base.join("app"), base.join("web"));
            for folder in [
                etc.join("prompts"),
                work.join("prompts"),
                other.join("prompts"),
            ] {
                std::fs::create_dir_all(folder).unwrap();
            }
            let config = etc.join("config.toml");
            std::fs::write(&config, "api_key = \"sk-secret\"").unwrap();
            std::fs::write(work.join("notes.md"), "the agents' notes").unwrap();
            Dirs {
                base,
                config,
                work,
                other,
            }
        }

        /// the implementer's prompt in `folder`, as `projects.app.prompts` reads it.
        fn read(&self, folder: &Path) -> Result<String, Refused> {
            let project = ProjectConfig::at(self.work.clone());
            let own = [self.config.clone()];
            let path = folder.join("narang.md");
            project.read_prompt(&path, "projects.app.prompts", &own, &[self.other.as_path()])
        }
    }

    impl Drop for Dirs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }

    fn link(to: &Path, at: &Path) {
        std::os::unix::fs::symlink(to, at).unwrap();
    }

    #[test]
    fn an_operators_prompt_is_read_and_may_be_a_link_to_another_of_theirs() {
        let d = Dirs::new("operator");
        let prompts = d.base.join("etc/prompts");
        std::fs::write(prompts.join("narang.md"), "Build it well.").unwrap();
        assert_eq!(d.read(&prompts).unwrap(), "Build it well.");
        std::fs::rename(prompts.join("narang.md"), d.base.join("etc/shared.md")).unwrap();
        link(Path::new("../shared.md"), &prompts.join("narang.md"));
        assert_eq!(d.read(&prompts).unwrap(), "Build it well.");
    }

    #[test]
    fn a_prompts_folder_in_a_workdir_however_spelled_is_read_as_the_workdirs() {
        let d = Dirs::new("spelled");
        link(&d.config, &d.work.join("prompts/narang.md"));
        let config = std::fs::canonicalize(&d.config).unwrap();
        let refusal = format!(
            "projects.app.prompts: prompts/narang.md links out of the workdir (to {}); hanarang reads files inside it only",
            config.display()
        );
        // Through `..` from the config's folder, and through a link to the workdir.
        let dotdot = d.base.join("etc/../app/prompts");
        assert_eq!(d.read(&dotdot).unwrap_err().to_string(), refusal);
        link(&d.work, &d.base.join("etc/app"));
        assert_eq!(
            d.read(&d.base.join("etc/app/prompts"))
                .unwrap_err()
                .to_string(),
            refusal
        );
        // In another project's workdir, the same.
        link(&d.config, &d.other.join("prompts/narang.md"));
        let other = d.base.join("etc/../web/prompts");
        assert_eq!(d.read(&other).unwrap_err().to_string(), refusal);
    }

    #[test]
    fn an_operators_prompt_linked_into_a_workdir_or_to_hanarangs_file_is_refused() {
        let d = Dirs::new("into");
        let prompts = d.base.join("etc/prompts");
        link(&d.work.join("notes.md"), &prompts.join("narang.md"));
        let e = d.read(&prompts).unwrap_err();
        let work = std::fs::canonicalize(&d.work).unwrap();
        assert!(
            e.reason
                .contains(&format!(" links into the workdir {} (to ", work.display())),
            "{e}"
        );
        std::fs::remove_file(prompts.join("narang.md")).unwrap();
        std::fs::hard_link(&d.config, prompts.join("narang.md")).unwrap();
        let e = d.read(&prompts).unwrap_err();
        assert!(e.reason.contains("is one of hanarang's own files"), "{e}");
        std::fs::remove_file(prompts.join("narang.md")).unwrap();
        nix::unistd::mkfifo(&prompts.join("narang.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = d.read(&prompts).unwrap_err();
        assert!(
            e.reason
                .ends_with("is a FIFO, not a file; hanarang reads only regular files as prompts"),
            "{e}"
        );
    }
}
