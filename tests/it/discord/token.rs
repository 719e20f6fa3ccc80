//! The bot token out of reach of whoever reads `serve`'s `/proc`: given in the
//! environment, it is gone from `/proc/<pid>/environ` once `serve` runs; given as a
//! file (`discord.token_file`, systemd's credential) it is read from there, and a file
//! that is missing or empty stops `serve` with exit 2, naming the key.

use std::process::{Child, Output, Stdio};

use super::*;

/// A variable beside the token: that `serve`'s environment was read at all.
const MARKER: (&str, &str) = ("HANARANG_TEST_ENVIRON_MARKER", "read-from-proc");

/// `hanarang serve` on the files' config with `envs`, its log on a pipe, the token's
/// variable not inherited from the tests.
fn start_serve(files: &Files, envs: &[(&str, &str)]) -> Child {
    files
        .serve()
        .env_remove("HANARANG_TEST_DISCORD_TOKEN")
        .env_remove("CREDENTIALS_DIRECTORY")
        .env(MARKER.0, MARKER.1)
        .envs(envs.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start serve")
}

/// Waits for `serve` to connect to the fake (which takes only its own token, on REST and
/// on the gateway); then what `/proc/<pid>/environ` holds, and `serve` stopped.
async fn connected_environ(fake: &FakeDiscord, ready: usize, mut serve: Child) -> Vec<u8> {
    let connected = fake.wait_until(PATIENCE, |f| f.ready_count() > ready).await;
    let environ = std::fs::read(format!("/proc/{}/environ", serve.id())).unwrap_or_default();
    let running = serve.try_wait().ok().flatten().is_none();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal serve");
    let out = tokio::task::spawn_blocking(move || serve.wait_with_output())
        .await
        .expect("wait")
        .expect("serve ends");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(connected && running, "serve connected to Discord: {log}");
    assert_eq!(out.status.code(), Some(0), "{log}");
    environ
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_from_the_environment_is_gone_from_serves_environ() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup::default());
    files.append_config(&discord_table(&fake));
    let serve = start_serve(
        &files,
        &[(
            "HANARANG_TEST_DISCORD_TOKEN",
            support::fake_discord::FAKE_TOKEN,
        )],
    );
    let environ = connected_environ(&fake, 0, serve).await;
    assert!(
        contains(&environ, &format!("{}={}", MARKER.0, MARKER.1)),
        "serve's environment was read: {}",
        String::from_utf8_lossy(&environ)
    );
    assert!(
        !contains(&environ, support::fake_discord::FAKE_TOKEN),
        "the token is in /proc/<pid>/environ: {}",
        String::from_utf8_lossy(&environ)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_reads_the_token_from_token_file_or_systemds_credential() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;

    // `token_file`, relative to the config's folder, its last newline trimmed.
    let files = Files::new(&Setup::default());
    files.append_config(&format!(
        "{}token_file = \"secrets/discord-token\"\n",
        discord_table(&fake)
    ));
    let secrets = files.dir.path().join("secrets");
    std::fs::create_dir_all(&secrets).expect("secrets folder");
    std::fs::write(
        secrets.join("discord-token"),
        format!("{}\n", support::fake_discord::FAKE_TOKEN),
    )
    .expect("token file");
    connected_environ(&fake, 0, start_serve(&files, &[])).await;

    // systemd's `LoadCredential=discord-token:…`: no `token_file`, no variable.
    let files = Files::new(&Setup::default());
    files.append_config(&discord_table(&fake));
    let credentials = files.dir.path().join("credentials");
    std::fs::create_dir_all(&credentials).expect("credentials folder");
    std::fs::write(
        credentials.join("discord-token"),
        support::fake_discord::FAKE_TOKEN,
    )
    .expect("credential");
    let ready = fake.ready_count();
    let serve = start_serve(
        &files,
        &[(
            "CREDENTIALS_DIRECTORY",
            credentials.to_str().expect("a UTF-8 path"),
        )],
    );
    connected_environ(&fake, ready, serve).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_or_empty_token_file_stops_serve_with_exit_2_naming_the_key() {
    let fake = FakeDiscord::start(FakeConfig::default()).await;
    let files = Files::new(&Setup::default());
    files.append_config(&format!(
        "{}token_file = \"discord-token\"\n",
        discord_table(&fake)
    ));
    let token_file = files.dir.path().join("discord-token");
    let serve = |files: &Files| -> Output {
        files
            .serve()
            .env(
                "HANARANG_TEST_DISCORD_TOKEN",
                support::fake_discord::FAKE_TOKEN,
            )
            .stderr(Stdio::piped())
            .output()
            .expect("run serve")
    };

    let missing = serve(&files);
    let said = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!(
            "discord.token_file: no file {}",
            token_file.display()
        )),
        "{said}"
    );

    std::fs::write(&token_file, "\n").expect("an empty token file");
    let empty = serve(&files);
    let said = String::from_utf8_lossy(&empty.stderr);
    assert_eq!(empty.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!(
            "discord.token_file: {} is empty",
            token_file.display()
        )),
        "{said}"
    );
    assert_eq!(fake.ready_count(), 0, "the variable was not used instead");
}
