//! `doctor`'s lines for a project that delivers through its forge: the token is there and
//! the forge takes it, the repository is reachable with what the flow needs (push, pull
//! requests, merge), the base branch is on the forge, and git can reach the push URL.

use super::Check;
use crate::config::{Config, ForgeConfig, ProjectConfig};
use crate::forge::{Forge, ForgeError};

/// One line per thing to check, per project with a forge.
pub async fn checks(config: &Config) -> Vec<Check> {
    let mut out = Vec::new();
    for (name, project) in &config.projects {
        if let Some(forge) = &project.forge {
            out.extend(project_checks(config, name, project, forge).await);
        }
    }
    out
}

async fn project_checks(
    config: &Config,
    name: &str,
    project: &ProjectConfig,
    forge: &ForgeConfig,
) -> Vec<Check> {
    let label = |what: &str| format!("forge {name} {what}");
    let key = format!("projects.{name}.forge");
    let token = match crate::forge::read_token(forge) {
        Ok(token) => token,
        Err(e) => {
            return vec![Check::fail(
                label("token"),
                e,
                format!(
                    "put the token in {key}.token_file (mode 600, readable by hanarang's user), or give systemd's credential forge-token (LoadCredential=forge-token:/etc/hanarang/forge-token)"
                ),
            )];
        }
    };
    let api = match crate::forge::connect(forge, &token) {
        Ok(api) => api,
        Err(e) => {
            return vec![Check::fail(
                label("token"),
                e.to_string(),
                format!("check {key}.api_url"),
            )];
        }
    };
    let mut out = Vec::new();
    let login = match api.login().await {
        Ok(login) => {
            out.push(Check::pass(
                label("token"),
                format!("the forge takes the token: it is {login}"),
            ));
            login
        }
        Err(e) => {
            out.push(refused(label("token"), &e, &key));
            return out;
        }
    };
    let repository = match api.repository().await {
        Ok(r) if r.push && r.merge => {
            out.push(Check::pass(
                label("repository"),
                format!(
                    "{login} may push to {} and open and merge its pull requests",
                    forge.repo
                ),
            ));
            r
        }
        Ok(r) => {
            out.push(Check::fail(
                label("repository"),
                format!("{login} may not push to {} (or merge there)", forge.repo),
                "give the token write access to the repository's contents and pull requests (GitHub: a fine-grained token with Contents, Pull requests: read and write, Checks and Commit statuses: read; Forgejo: the repository scope, write)",
            ));
            r
        }
        Err(e) => {
            out.push(refused(label("repository"), &e, &key));
            return out;
        }
    };
    let base = project
        .base_branch
        .clone()
        .unwrap_or(repository.default_branch);
    match api.branch(&base).await {
        Ok(Some(commit)) => out.push(Check::pass(
            label("base branch"),
            format!(
                "{base} is on the forge at {}",
                &commit[..commit.len().min(7)]
            ),
        )),
        Ok(None) => out.push(Check::fail(
            label("base branch"),
            format!("the forge has no branch {base}: pull requests could not go there"),
            format!("push {base} to the forge, or set projects.{name}.base_branch"),
        )),
        Err(e) => out.push(refused(label("base branch"), &e, &key)),
    }
    out.push(
        push_url(
            config,
            project,
            forge,
            &token,
            api.as_ref(),
            &label("push URL"),
        )
        .await,
    );
    out
}

/// git reaches the push URL with the token.
async fn push_url(
    config: &Config,
    project: &ProjectConfig,
    forge: &ForgeConfig,
    token: &crate::forge::ForgeToken,
    api: &dyn Forge,
    label: &str,
) -> Check {
    let Some(url) = forge.push_url() else {
        return Check::fail(label, "no push URL", "set remote");
    };
    let user = api.git_user().await.unwrap_or_default();
    let runs = std::env::temp_dir().join(format!("hanarang-doctor-{}", std::process::id()));
    // The credential file goes in a folder of its own, removed after.
    let repo = crate::git::Repo::new(&project.workdir, &crate::fence::Own::of(config, &runs));
    let remote = crate::git::remote::Remote {
        url: &url,
        user: &user,
        token: token.expose(),
    };
    let reached = crate::git::remote::reachable(&repo, &remote).await;
    let _ = std::fs::remove_dir_all(&runs);
    match reached {
        Ok(()) => Check::pass(label, format!("git reaches {url} with the token")),
        Err(e) => Check::fail(
            label,
            e,
            "check the remote key (the repository's HTTPS URL) and that the token may read and push the repository",
        ),
    }
}

/// A forge's refusal as a failed line with what to do.
fn refused(label: String, e: &ForgeError, key: &str) -> Check {
    let fix = match e {
        ForgeError::Unauthorized(_) => format!("make a new token and put it in {key}.token_file"),
        ForgeError::NotFound(_) => {
            format!("check {key}.repo (owner/name) and that the token sees it")
        }
        ForgeError::Unavailable(_) | ForgeError::RateLimited { .. } => {
            format!("check {key}.api_url and the network; try again")
        }
        _ => format!("check {key}"),
    };
    Check::fail(label, e.to_string(), fix)
}
