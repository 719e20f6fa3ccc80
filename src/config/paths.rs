//! Paths in the config are the config file's: a relative workdir, program or SQLite
//! database is taken from its folder, so every command finds the same ones; and database
//! URLs as errors show them (the password hidden).

use super::*;

impl Config {
    /// Makes every relative path of the file absolute, from `base`.
    pub(super) fn resolve_paths(&mut self, base: &Path) {
        self.database.url = absolute_sqlite_url(&self.database.url, base).into();
        for project in self.projects.values_mut() {
            if project.workdir.is_relative() {
                project.workdir = base.join(&project.workdir);
            }
            if let Ok(absolute) = std::fs::canonicalize(&project.workdir) {
                project.workdir = absolute;
            }
            // The instructions live in the repository; the prompts beside the config.
            if let Some(file) = &mut project.instructions
                && file.is_relative()
            {
                *file = project.workdir.join(&*file);
            }
            if let Some(folder) = &mut project.prompts
                && folder.is_relative()
            {
                *folder = base.join(&*folder);
            }
        }
        if let Some(file) = self.discord.as_mut().and_then(|d| d.token_file.as_mut())
            && file.is_relative()
        {
            *file = base.join(&*file);
        }
        for project in self.projects.values_mut() {
            if let Some(file) = project.forge.as_mut().and_then(|f| f.token_file.as_mut())
                && file.is_relative()
            {
                *file = base.join(&*file);
            }
        }
        let relative_program = |program: &mut String| {
            // A bare name is looked up on PATH; a path with a `/` is the file's.
            if program.contains('/') && Path::new(program.as_str()).is_relative() {
                *program = base.join(program.as_str()).display().to_string();
            }
        };
        relative_program(&mut self.agent.program);
        for actor in Actor::ALL {
            if let Some(program) = &mut self.agent.sister_mut(actor).program {
                relative_program(program);
            }
        }
        for profile in self.agent.profiles.values_mut() {
            if let Some(program) = &mut profile.program {
                relative_program(program);
            }
        }
    }
}

/// The name of the systemd credential that holds the bot token
/// (`LoadCredential=discord-token:/etc/hanarang/discord-token`).
pub const TOKEN_CREDENTIAL: &str = "discord-token";

/// The variable systemd sets to the folder of a service's credentials.
pub const CREDENTIALS_ENV: &str = "CREDENTIALS_DIRECTORY";

/// Where the bot token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// `discord.token_file`.
    File(PathBuf),
    /// systemd's credential `discord-token`, in `$CREDENTIALS_DIRECTORY`.
    Credential(PathBuf),
    /// The environment variable `discord.token_env` names.
    Env(String),
}

impl TokenSource {
    /// The key (or the setting) a message about the token names.
    pub fn key(&self) -> String {
        match self {
            TokenSource::File(_) => "discord.token_file".into(),
            TokenSource::Credential(_) => format!("the systemd credential {TOKEN_CREDENTIAL}"),
            TokenSource::Env(_) => "discord.token_env".into(),
        }
    }

    /// Where the token is: a file's path, or the variable's name.
    pub fn place(&self) -> String {
        match self {
            TokenSource::File(path) | TokenSource::Credential(path) => path.display().to_string(),
            TokenSource::Env(name) => name.clone(),
        }
    }
}

impl fmt::Display for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::File(path) => write!(f, "discord.token_file {}", path.display()),
            TokenSource::Credential(path) => write!(
                f,
                "the systemd credential {TOKEN_CREDENTIAL} ({})",
                path.display()
            ),
            TokenSource::Env(name) => write!(f, "${name}"),
        }
    }
}

impl DiscordConfig {
    /// Where the token is read from: `token_file` when set; else systemd's credential
    /// when the service was given one; else the variable `token_env`. A file is
    /// preferred: a variable sits in the process's environment, which `/proc` shows.
    pub fn token_source(&self) -> TokenSource {
        if let Some(file) = &self.token_file {
            return TokenSource::File(file.clone());
        }
        if let Some(credential) = credentials_dir()
            .map(|dir| dir.join(TOKEN_CREDENTIAL))
            .filter(|path| path.exists())
        {
            return TokenSource::Credential(credential);
        }
        TokenSource::Env(self.token_env.clone())
    }
}

pub(super) fn credentials_dir() -> Option<PathBuf> {
    std::env::var_os(CREDENTIALS_ENV)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

/// hanarang's secrets on disk, which no sister may read: the token's file, and systemd's
/// credentials folder whenever the service has one (all it holds is the service's).
/// Resolved, since the fence protects a path as it finds it, links not followed.
pub fn secret_files(config: &Config) -> Vec<PathBuf> {
    let token_file = config.discord.as_ref().and_then(|d| d.token_file.clone());
    let forge_tokens = config
        .projects
        .values()
        .filter_map(|p| p.forge.as_ref()?.token_file.clone());
    token_file
        .into_iter()
        .chain(forge_tokens)
        .chain(credentials_dir())
        .map(|path| {
            std::fs::canonicalize(&path)
                .or_else(|_| std::path::absolute(&path))
                .unwrap_or(path)
        })
        .collect()
}

/// The relative file path of a `sqlite:` URL and what follows it (`?mode=…`); `None` for
/// any other URL, an absolute path or an in-memory database.
pub(super) fn relative_sqlite_path(url: &str) -> Option<(&str, Option<&str>)> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let in_memory = path.is_empty()
        || path == ":memory:"
        || query.is_some_and(|q| q.split('&').any(|kv| kv == "mode=memory"));
    (!in_memory && Path::new(path).is_relative()).then_some((path, query))
}

/// A `sqlite:` URL whose relative file path is taken from `base`; any other URL (and an
/// in-memory database) unchanged.
pub(super) fn absolute_sqlite_url(url: &str, base: &Path) -> String {
    let Some((path, query)) = relative_sqlite_path(url) else {
        return url.to_string();
    };
    let mut absolute = format!("sqlite://{}", base.join(path).display());
    if let Some(query) = query {
        absolute.push('?');
        absolute.push_str(query);
    }
    absolute
}

/// Before relative SQLite paths were the config file's, they were the current folder's
/// (under systemd, its `WorkingDirectory`). A database found only there would be silently
/// replaced by a new empty one beside the config: refused, naming both places.
pub(super) fn database_left_behind(url: &str, base: &Path) -> Option<ConfigProblem> {
    let (path, _) = relative_sqlite_path(url)?;
    let beside = std::path::absolute(base.join(path)).ok()?;
    let here = std::path::absolute(path).ok()?;
    (here != beside && !beside.exists() && here.is_file()).then(|| ConfigProblem {
        key: "database.url".into(),
        message: format!(
            "{url:?} is taken from the config file's folder ({}, which does not exist), but the database is at {}, where hanarang looked before: set url = \"sqlite://{}\" (or move the file beside the config)",
            beside.display(),
            here.display(),
            here.display()
        ),
    })
}

/// Whether a database URL names PostgreSQL (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// What of a PostgreSQL database a sister must not reach, as hanarang
/// itself finds it (sqlx reads the URL, then `PG*` variables, then the password file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostgresReach {
    /// The password: in the URL (`user:pw@` or `password=`), else `$PGPASSWORD`.
    pub password: Option<String>,
    /// The password file: `$PGPASSFILE`, else `~/.pgpass`.
    pub passfile: Option<PathBuf>,
    /// The server's TCP port; `None` when it is reached through a Unix socket.
    pub tcp_port: Option<u16>,
}

/// `None` for a database that is not PostgreSQL.
pub fn postgres_reach(url: &str) -> Option<PostgresReach> {
    if !is_postgres_url(url) {
        return None;
    }
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let parsed = url::Url::parse(url).ok();
    let param = |key: &str| {
        parsed.as_ref().and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.into_owned())
        })
    };
    let password = parsed
        .as_ref()
        .and_then(|u| u.password())
        .map(|p| {
            percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .into_owned()
        })
        .or_else(|| param("password"))
        .or_else(|| var("PGPASSWORD"))
        .filter(|p| !p.is_empty());
    let passfile = var("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")));
    let port = parsed
        .as_ref()
        .and_then(|u| u.port())
        .or_else(|| param("port").and_then(|p| p.parse().ok()))
        .or_else(|| var("PGPORT").and_then(|p| p.parse().ok()))
        .unwrap_or(5432);
    // No host named: sqlx takes the server's socket where one of these folders has it.
    let default_socket = || {
        ["/var/run/postgresql", "/private/tmp", "/tmp"]
            .into_iter()
            .find(|dir| Path::new(dir).join(format!(".s.PGSQL.{port}")).exists())
            .map(str::to_string)
    };
    let host = param("host")
        .or_else(|| {
            parsed
                .as_ref()
                .and_then(|u| u.host_str())
                .map(str::to_string)
        })
        .filter(|h| !h.is_empty())
        .or_else(|| var("PGHOST"))
        .or_else(default_socket)
        .unwrap_or_default();
    // A host that is a folder (or "%2F…", decoded) is the server's Unix socket.
    let tcp_port =
        (!host.starts_with('/') && !host.to_ascii_lowercase().starts_with("%2f")).then_some(port);
    Some(PostgresReach {
        password,
        passfile,
        tcp_port,
    })
}

/// `url` without its password, for messages and logs: `postgres://user:secret@host/db`
/// is shown as `postgres://user:***@host/db`, and a `password=` parameter as
/// `password=***`.
pub fn redacted(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        // Not a URL at all: a password in it could not be found, so none of it is shown
        // past a user name.
        return match url.rsplit_once('@') {
            Some((_, host)) => format!("***@{host}"),
            None => url.to_string(),
        };
    };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("***"));
    }
    if parsed
        .query_pairs()
        .any(|(k, _)| k.eq_ignore_ascii_case("password"))
    {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if k.eq_ignore_ascii_case("password") {
                    "***".into()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn a_database_url_shows_no_password_when_printed() {
        let config = crate::config::DatabaseConfig {
            url: "postgres://bob:s3cret@db:5432/hanarang".into(),
        };
        for shown in [format!("{config:?}"), config.url.to_string()] {
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(
                shown.contains("postgres://bob:***@db:5432/hanarang"),
                "{shown}"
            );
        }
        assert_eq!(
            config.url.as_str(),
            "postgres://bob:s3cret@db:5432/hanarang"
        );
    }

    #[test]
    fn a_password_is_hidden_wherever_the_url_carries_it() {
        assert_eq!(
            redacted("postgres://bob:s3cret@db:5432/hanarang"),
            "postgres://bob:***@db:5432/hanarang"
        );
        assert_eq!(
            redacted("postgres://bob@db/h?sslmode=require&password=s3cret"),
            "postgres://bob@db/h?sslmode=require&password=***"
        );
        assert_eq!(redacted("sqlite:///srv/h.db"), "sqlite:///srv/h.db");
        assert!(!redacted("not a url:s3cret@db").contains("s3cret"));
    }
}
