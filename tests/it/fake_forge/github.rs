//! GitHub's API: a pull request that follows pushes, merges only at the head it was shown,
//! and what CI and people leave on it.

use serde_json::{Value, json};

use super::{Api, TOKEN, commit_on, git_ok, noise, seed};
use crate::support::fake_forge::{BOT_LOGIN, Forge, Kind, Verdict};

#[tokio::test]
async fn github_pull_request_follows_pushes_and_merges_only_its_shown_head() {
    let seed = seed();
    let forge = Forge::start(Kind::GitHub, "acme", "app", TOKEN, Some(seed.path()));
    let api = Api::new(&forge, "Bearer");
    let base = forge.branch("main").expect("main");
    let first = commit_on(seed.path(), "feature", "a.txt", b"a\n");
    git_ok(
        seed.path(),
        &["push", "--quiet", &forge.clone_url_with_token(), "feature"],
    );

    let create = json!({ "title": "Add a", "head": "acme:feature", "base": "main", "body": "Why" });
    let created = api
        .call("POST", "/repos/acme/app/pulls", Some(create.clone()))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["number"], 1);
    assert_eq!(created.body["head"]["sha"], first.as_str());
    assert_eq!(created.body["head"]["repo"]["full_name"], "acme/app");
    let again = api
        .call("POST", "/repos/acme/app/pulls", Some(create))
        .await;
    assert_eq!(again.status, 422);
    assert_eq!(
        again.body["errors"][0]["message"],
        "A pull request already exists for acme:feature."
    );

    let listed = api
        .call(
            "GET",
            "/repos/acme/app/pulls?state=open&head=acme:feature",
            None,
        )
        .await;
    assert_eq!(listed.body.as_array().map(Vec::len), Some(1));
    assert!(
        listed.body[0].get("merged").is_none(),
        "the list is pull-request-simple"
    );

    let got = api.call("GET", "/repos/acme/app/pulls/1", None).await;
    let etag = got.header("etag").expect("an ETag").to_string();
    assert_eq!(got.body["merged"], false);
    let counted = forge.counted_requests();
    let same = api
        .call_with(
            "GET",
            "/repos/acme/app/pulls/1",
            None,
            &[("If-None-Match", &etag)],
        )
        .await;
    assert_eq!(same.status, 304);
    assert_eq!(same.body, Value::Null);
    assert_eq!(forge.counted_requests(), counted, "a 304 is not counted");
    assert_eq!(forge.not_modified_requests(), 1);

    let second = commit_on(seed.path(), "feature", "b.txt", b"b\n");
    git_ok(
        seed.path(),
        &["push", "--quiet", &forge.clone_url_with_token(), "feature"],
    );
    let moved = api
        .call_with(
            "GET",
            "/repos/acme/app/pulls/1",
            None,
            &[("If-None-Match", &etag)],
        )
        .await;
    assert_eq!(moved.status, 200);
    assert_eq!(moved.body["head"]["sha"], second.as_str());

    let stale = json!({ "merge_method": "squash", "sha": first });
    let refused = api
        .call("PUT", "/repos/acme/app/pulls/1/merge", Some(stale))
        .await;
    assert_eq!(refused.status, 409);
    assert_eq!(
        refused.body["message"],
        "Head branch was modified. Review and try the merge again."
    );
    assert_eq!(forge.branch("main").as_deref(), Some(base.as_str()));

    forge.refuse_merges(
        405,
        "At least 1 approving review is required by reviewers with write access.",
    );
    let shown = json!({ "merge_method": "squash", "sha": second });
    let protected = api
        .call("PUT", "/repos/acme/app/pulls/1/merge", Some(shown.clone()))
        .await;
    assert_eq!(protected.status, 405);
    assert!(
        protected.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("approving review"))
    );
    forge.accept_merges();

    let merged = api
        .call("PUT", "/repos/acme/app/pulls/1/merge", Some(shown))
        .await;
    assert_eq!(merged.status, 200, "{}", merged.body);
    assert_eq!(merged.body["merged"], true);
    let squash = merged.body["sha"]
        .as_str()
        .expect("the merge's sha")
        .to_string();
    assert_eq!(forge.branch("main").as_deref(), Some(squash.as_str()));
    let bare = forge.bare_path();
    assert_eq!(git_ok(bare, &["rev-parse", &format!("{squash}^")]), base);
    assert_eq!(
        git_ok(bare, &["rev-parse", &format!("{squash}^{{tree}}")]),
        git_ok(bare, &["rev-parse", &format!("{second}^{{tree}}")])
    );
    let after = api.call("GET", "/repos/acme/app/pulls/1", None).await;
    assert_eq!(after.body["state"], "closed");
    assert_eq!(after.body["merged_by"]["login"], BOT_LOGIN);
    assert_eq!(after.body["merge_commit_sha"], squash.as_str());
    let records = forge.merges();
    assert_eq!(
        records.iter().map(|m| m.status).collect::<Vec<_>>(),
        [409, 405, 200]
    );
    assert_eq!(records[0].expected_head.as_deref(), Some(first.as_str()));
    assert!(forge.unknown_requests().is_empty());
}

#[tokio::test]
async fn github_checks_statuses_logs_and_people_on_the_forge() {
    let seed = seed();
    let forge = Forge::start(Kind::GitHub, "acme", "app", TOKEN, Some(seed.path()));
    let api = Api::new(&forge, "token");
    let head = commit_on(seed.path(), "hanarang/sprint-1", "a.txt", b"a\n");
    git_ok(
        seed.path(),
        &[
            "push",
            "--quiet",
            &forge.clone_url_with_token(),
            "hanarang/sprint-1",
        ],
    );
    let pr = api
        .call(
            "POST",
            "/repos/acme/app/pulls",
            Some(json!({ "title": "t", "head": "hanarang/sprint-1", "base": "main" })),
        )
        .await;
    assert_eq!(pr.status, 201);

    let none = api
        .call(
            "GET",
            &format!("/repos/acme/app/commits/{head}/status"),
            None,
        )
        .await;
    assert_eq!(none.body["state"], "pending");
    assert_eq!(none.body["total_count"], 0);

    let log = noise(50 * 1024 * 1024);
    let job = forge.set_check(
        "hanarang/sprint-1",
        "test",
        "completed",
        Some("failure"),
        Some(&log),
    );
    forge.set_check(&head, "build", "completed", Some("success"), None);
    forge.set_status(
        &head,
        "ci/lint",
        "success",
        Some("https://ci.invalid/1"),
        None,
    );
    let runs = api
        .call(
            "GET",
            "/repos/acme/app/commits/hanarang%2Fsprint-1/check-runs",
            None,
        )
        .await;
    assert_eq!(runs.body["total_count"], 2, "{}", runs.body);
    assert_eq!(runs.body["check_runs"][0]["id"], job);
    assert_eq!(runs.body["check_runs"][0]["conclusion"], "failure");
    let status = api
        .call(
            "GET",
            &format!("/repos/acme/app/commits/{head}/status"),
            None,
        )
        .await;
    assert_eq!(status.body["state"], "success");
    assert_eq!(status.body["statuses"][0]["context"], "ci/lint");

    let redirect = api
        .call(
            "GET",
            &format!("/repos/acme/app/actions/jobs/{job}/logs"),
            None,
        )
        .await;
    assert_eq!(redirect.status, 302);
    let location = redirect.header("location").expect("a Location");
    let mut download = reqwest::get(location).await.expect("the log");
    let mut received = 0;
    while let Some(chunk) = download.chunk().await.expect("a chunk") {
        received += chunk.len();
    }
    assert_eq!(received, log.len());

    forge.add_review(
        1,
        "octocat",
        Verdict::ChangesRequested,
        "Not yet",
        &[("a.txt", 1, "why a?")],
    );
    forge.comment(1, "mallory", "ignore me");
    let reviews = api
        .call("GET", "/repos/acme/app/pulls/1/reviews", None)
        .await;
    assert_eq!(reviews.body[0]["state"], "CHANGES_REQUESTED");
    assert_eq!(reviews.body[0]["commit_id"], head.as_str());
    let lines = api
        .call("GET", "/repos/acme/app/pulls/1/comments", None)
        .await;
    assert_eq!(lines.body[0]["line"], 1);
    assert_eq!(lines.body[0]["path"], "a.txt");

    let foreign = forge.push_foreign("hanarang/sprint-1", &[("b.txt", "b\n")]);
    let moved = api.call("GET", "/repos/acme/app/pulls/1", None).await;
    assert_eq!(moved.body["head"]["sha"], foreign.as_str());
    let outdated = api
        .call("GET", "/repos/acme/app/pulls/1/comments", None)
        .await;
    assert_eq!(outdated.body[0]["line"], Value::Null);
    assert_eq!(outdated.body[0]["original_line"], 1);
    let comments = api
        .call("GET", "/repos/acme/app/issues/1/comments", None)
        .await;
    assert_eq!(comments.body[0]["user"]["login"], "mallory");

    forge.close(1, "octocat");
    let issue = api.call("GET", "/repos/acme/app/issues/1", None).await;
    assert_eq!(issue.body["state"], "closed");
    assert_eq!(issue.body["closed_by"]["login"], "octocat");
    let pull = api.call("GET", "/repos/acme/app/pulls/1", None).await;
    assert_eq!(pull.body["merged"], false);

    forge.delete_pr(1);
    assert_eq!(
        api.call("GET", "/repos/acme/app/pulls/1", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn github_rebase_replays_the_head_and_a_conflict_is_not_mergeable() {
    let seed = seed();
    let forge = Forge::start(Kind::GitHub, "acme", "app", TOKEN, Some(seed.path()));
    let api = Api::new(&forge, "Bearer");
    commit_on(seed.path(), "feature", "a.txt", b"a\n");
    let head = commit_on(seed.path(), "feature", "b.txt", b"b\n");
    git_ok(
        seed.path(),
        &["push", "--quiet", &forge.clone_url_with_token(), "feature"],
    );
    let moved_base = forge.push_as("octocat", "main", &[("c.txt", "c\n")]);
    let pr = json!({ "title": "a and b", "head": "feature", "base": "main" });
    assert_eq!(
        api.call("POST", "/repos/acme/app/pulls", Some(pr))
            .await
            .status,
        201
    );

    let rebase = json!({ "merge_method": "rebase", "sha": head });
    let merged = api
        .call("PUT", "/repos/acme/app/pulls/1/merge", Some(rebase))
        .await;
    assert_eq!(merged.status, 200, "{}", merged.body);
    let main = forge.branch("main").expect("main");
    assert_eq!(merged.body["sha"], main.as_str());
    assert_ne!(main, head, "GitHub's rebase writes new commits");
    let bare = forge.bare_path();
    assert_eq!(
        git_ok(bare, &["rev-parse", &format!("{main}~2")]),
        moved_base
    );
    assert_eq!(
        git_ok(bare, &["log", "-2", "--format=%s", &main]),
        "Change b.txt\nChange a.txt"
    );
    assert_eq!(git_ok(bare, &["log", "-1", "--format=%an", &main]), "t");
    let files = git_ok(bare, &["ls-tree", "--name-only", &main]);
    assert_eq!(files, "README.md\na.txt\nb.txt\nc.txt");

    let clash = commit_on(seed.path(), "clash", "README.md", b"mine\n");
    git_ok(
        seed.path(),
        &["push", "--quiet", &forge.clone_url_with_token(), "clash"],
    );
    forge.push_as("octocat", "main", &[("README.md", "theirs\n")]);
    let pr = json!({ "title": "clash", "head": "clash", "base": "main" });
    assert_eq!(
        api.call("POST", "/repos/acme/app/pulls", Some(pr))
            .await
            .status,
        201
    );
    let before = forge.branch("main");
    let merge = json!({ "merge_method": "merge", "sha": clash });
    let refused = api
        .call("PUT", "/repos/acme/app/pulls/2/merge", Some(merge))
        .await;
    assert_eq!(refused.status, 405);
    assert_eq!(refused.body["message"], "Pull Request is not mergeable");
    assert_eq!(forge.branch("main"), before);
}
