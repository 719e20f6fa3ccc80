//! The sprint's branch on the forge, pushed and fetched by hanarang's own git (`git/mod.rs`:
//! no hook, no helper of the repository's). The token reaches git in a credential file of
//! the runs folder (out of the sisters' reach), readable by this call's git alone, removed
//! as soon as git is done: never in an argument, an environment a sister inherits, or the
//! repository's config.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use super::{Repo, failed};

/// Where and as whom git talks to the forge.
pub struct Remote<'a> {
    /// The repository's HTTP(S) URL, without credentials.
    pub url: &'a str,
    /// The user name the token goes with (GitHub: `x-access-token`; Forgejo: its login).
    pub user: &'a str,
    pub token: &'a str,
}

/// Pushes `head` as `branch` to the forge, only onto `expected` (what hanarang pushed
/// there last; `None`: the branch must not be there yet): never over another's push.
pub async fn push(
    repo: &Repo,
    remote: &Remote<'_>,
    branch: &str,
    head: &str,
    expected: Option<&str>,
) -> Result<(), String> {
    let lease = format!(
        "--force-with-lease=refs/heads/{branch}:{}",
        expected.unwrap_or("")
    );
    let refspec = format!("{head}:refs/heads/{branch}");
    with_credentials(repo, remote, |view, settings, readable| async move {
        let args = [
            "push",
            "--porcelain",
            "--no-verify",
            &lease,
            remote.url,
            &refspec,
        ];
        repo.git_remote(&view, &args, &settings, &readable)
            .await
            .map(|_| ())
            .map_err(|e| failed(&format!("cannot push {branch} to {}", remote.url), e))
    })
    .await
}

/// Fetches `branch` from the forge: the commit it points at there (now in the
/// repository's objects).
pub async fn fetch(repo: &Repo, remote: &Remote<'_>, branch: &str) -> Result<String, String> {
    let refspec = format!("refs/heads/{branch}");
    let fetched = with_credentials(repo, remote, |view, settings, readable| async move {
        let args = ["fetch", "--quiet", "--no-tags", remote.url, &refspec];
        repo.git_remote(&view, &args, &settings, &readable)
            .await
            .map_err(|e| failed(&format!("cannot fetch {branch} from {}", remote.url), e))?;
        let head = ["rev-parse", "--verify", "FETCH_HEAD^{commit}"];
        repo.git_remote(&view, &head, &[], &[])
            .await
            .map_err(|e| failed("the fetch names no commit", e))
    })
    .await?;
    Ok(fetched.trim().to_string())
}

/// Whether git reaches the remote with the token (it lists its branches).
pub async fn reachable(repo: &Repo, remote: &Remote<'_>) -> Result<(), String> {
    with_credentials(repo, remote, |view, settings, readable| async move {
        let args = ["ls-remote", "--heads", remote.url];
        repo.git_remote(&view, &args, &settings, &readable)
            .await
            .map(|_| ())
            .map_err(|e| failed(&format!("git cannot reach {}", remote.url), e))
    })
    .await
}

/// Runs `call` with the settings that give git the token (a credential file written
/// now, removed after) and the protocols of the remote's URL allowed.
async fn with_credentials<F, Fut, T>(repo: &Repo, remote: &Remote<'_>, call: F) -> Result<T, String>
where
    F: FnOnce(super::View, Vec<(&'static str, String)>, Vec<PathBuf>) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let url = url::Url::parse(remote.url).map_err(|e| format!("{}: {e}", remote.url))?;
    let scheme = url.scheme().to_string();
    if !matches!(scheme.as_str(), "https" | "http") {
        return Err(format!(
            "{}: the token is given to git over HTTP(S) only",
            remote.url
        ));
    }
    let view = repo
        .view()
        .await
        .map_err(|e| failed("cannot read the repository", e))?;
    let file = Credentials::write(repo, &url, remote)?;
    // git runs a helper through the shell: the path is quoted for it.
    let quoted = file.0.display().to_string().replace('\'', "'\\''");
    let helper = format!("store --file='{quoted}'");
    let settings: Vec<(&'static str, String)> = vec![
        // The list is reset first: no helper of the person's own config is asked.
        ("credential.helper", String::new()),
        ("credential.helper", helper),
        ("credential.interactive", "false".into()),
        (
            if scheme == "https" {
                "protocol.https.allow"
            } else {
                "protocol.http.allow"
            },
            "always".into(),
        ),
    ];
    let result = call(view, settings, vec![file.0.clone()]).await;
    drop(file);
    result
}

/// A credential file of git's `store` helper, removed when dropped.
struct Credentials(PathBuf);

impl Credentials {
    fn write(repo: &Repo, url: &url::Url, remote: &Remote<'_>) -> Result<Credentials, String> {
        use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
        let folder = repo
            .runs_dir()
            .ok_or("no runs folder to keep the forge's credentials in")?;
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let path = folder.join(format!(
            ".forge-credentials-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let host = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        };
        let line = format!(
            "{}://{}:{}@{host}\n",
            url.scheme(),
            utf8_percent_encode(remote.user, NON_ALPHANUMERIC),
            utf8_percent_encode(remote.token, NON_ALPHANUMERIC)
        );
        let cannot = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
        std::fs::create_dir_all(folder).map_err(cannot)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(cannot)?;
        let credentials = Credentials(path.clone());
        file.write_all(line.as_bytes()).map_err(cannot)?;
        Ok(credentials)
    }
}

impl Drop for Credentials {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
