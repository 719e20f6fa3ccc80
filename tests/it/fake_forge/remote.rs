//! The git remote: git's own smart HTTP, the token checked, large pushes chunked.

use super::{TOKEN, commit_on, git, git_ok, noise, seed};
use crate::support::TempDir;
use crate::support::fake_forge::{BOT_LOGIN, Forge, Kind, Permissions, Route};

#[test]
fn git_pushes_over_http_only_with_the_token() {
    let seed = seed();
    let forge = Forge::start(Kind::GitHub, "acme", "app", TOKEN, Some(seed.path()));
    let main = git_ok(seed.path(), &["rev-parse", "HEAD"]);
    assert_eq!(forge.branch("main"), Some(main));

    let head = commit_on(seed.path(), "feature", "big.bin", &noise(3 * 1024 * 1024));
    let refused = git(seed.path(), &["push", &forge.remote_url(), "feature"]);
    assert!(
        !refused.status.success(),
        "a push without the token went through"
    );
    assert!(forge.requests().iter().any(|r| r.status == 401));
    assert_eq!(forge.branch("feature"), None);

    git_ok(
        seed.path(),
        &["push", "--quiet", &forge.clone_url_with_token(), "feature"],
    );
    assert_eq!(forge.branch("feature").as_deref(), Some(head.as_str()));
    let pushes = forge.pushes();
    assert_eq!(pushes.len(), 1, "{pushes:?}");
    assert_eq!(pushes[0].refname, "refs/heads/feature");
    assert_eq!(pushes[0].new, head);
    assert!(pushes[0].applied && pushes[0].by == BOT_LOGIN);
    let chunked = forge.requests().iter().any(|r| {
        r.route == Route::Git
            && r.header("transfer-encoding")
                .is_some_and(|v| v.contains("chunked"))
    });
    assert!(chunked, "git sent no chunked body; the test proves less");

    let clone = TempDir::new("forge-clone");
    let target = clone.path().join("app");
    git_ok(
        clone.path(),
        &[
            "clone",
            "--quiet",
            &forge.clone_url_with_token(),
            target.to_str().expect("a UTF-8 path"),
        ],
    );
    assert_eq!(git_ok(&target, &["rev-parse", "origin/feature"]), head);

    forge.set_permissions(Permissions {
        push: false,
        ..Permissions::default()
    });
    commit_on(seed.path(), "feature", "more.txt", b"more\n");
    let denied = git(
        seed.path(),
        &["push", &forge.clone_url_with_token(), "feature"],
    );
    assert!(!denied.status.success());
    assert!(forge.requests().iter().any(|r| r.status == 403));
    assert_eq!(forge.branch("feature").as_deref(), Some(head.as_str()));
}
