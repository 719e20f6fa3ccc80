//! Forgejo's API: the same essentials, in Forgejo's words.

use serde_json::{Value, json};

use super::{Api, TOKEN, commit_on, git_ok, seed};
use crate::support::fake_forge::{Etags, Forge, Kind, Verdict};

#[tokio::test]
async fn forgejo_pull_request_essentials() {
    let seed = seed();
    let forge = Forge::start(Kind::Forgejo, "acme", "app", TOKEN, Some(seed.path()));
    let api = Api::new(&forge, "token");
    assert!(forge.api_url().ends_with("/api/v1"));
    let base = forge.branch("main").expect("main");
    let first = commit_on(seed.path(), "feature", "a.txt", b"a\n");
    git_ok(
        seed.path(),
        &["push", "--quiet", &forge.clone_url_with_token(), "feature"],
    );

    let create = json!({ "title": "Add a", "head": "feature", "base": "main", "body": "Why" });
    let created = api
        .call("POST", "/repos/acme/app/pulls", Some(create.clone()))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["head"]["sha"], first.as_str());
    let again = api
        .call("POST", "/repos/acme/app/pulls", Some(create))
        .await;
    assert_eq!(again.status, 409);
    assert!(
        again.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("pull request already exists for these targets"))
    );

    let plain = api.call("GET", "/repos/acme/app/pulls/1", None).await;
    assert_eq!(
        plain.header("etag"),
        None,
        "Gitea sends no ETag on API JSON"
    );
    forge.set_etags(Etags::Strong);
    let tagged = api.call("GET", "/repos/acme/app/pulls/1", None).await;
    let etag = tagged.header("etag").expect("an ETag").to_string();
    assert!(etag.starts_with('"'));
    let same = api
        .call_with(
            "GET",
            "/repos/acme/app/pulls/1",
            None,
            &[("If-None-Match", &etag)],
        )
        .await;
    assert_eq!(same.status, 304);
    let by_branches = api
        .call("GET", "/repos/acme/app/pulls/main/feature", None)
        .await;
    assert_eq!(by_branches.body["number"], 1);

    let edited = api
        .call(
            "PATCH",
            "/repos/acme/app/pulls/1",
            Some(json!({ "body": "Why, again" })),
        )
        .await;
    assert_eq!(edited.status, 201, "Gitea answers an edit 201");

    let empty = api
        .call(
            "GET",
            &format!("/repos/acme/app/commits/{first}/status"),
            None,
        )
        .await;
    assert_eq!(empty.body["state"], "");
    assert_eq!(empty.body["statuses"], Value::Null);
    forge.set_status("feature", "ci/test", "failure", None, Some("2 failed"));
    let failed = api
        .call("GET", "/repos/acme/app/commits/feature/status", None)
        .await;
    assert_eq!(failed.body["state"], "failure");
    assert_eq!(failed.body["statuses"][0]["status"], "failure");

    let review = forge.add_review(
        1,
        "octocat",
        Verdict::ChangesRequested,
        "No",
        &[("a.txt", 1, "why?")],
    );
    let reviews = api
        .call("GET", "/repos/acme/app/pulls/1/reviews", None)
        .await;
    assert_eq!(reviews.body[0]["state"], "REQUEST_CHANGES");
    let lines = api
        .call(
            "GET",
            &format!("/repos/acme/app/pulls/1/reviews/{review}/comments"),
            None,
        )
        .await;
    assert_eq!(lines.body[0]["position"], 1);

    let stale = json!({ "Do": "merge", "head_commit_id": base });
    let refused = api
        .call("POST", "/repos/acme/app/pulls/1/merge", Some(stale))
        .await;
    assert_eq!(refused.status, 409);
    assert_eq!(refused.body["message"], "head out of date");
    let shown = json!({ "Do": "merge", "head_commit_id": first });
    let merged = api
        .call("POST", "/repos/acme/app/pulls/1/merge", Some(shown.clone()))
        .await;
    assert_eq!(merged.status, 200);
    assert_eq!(
        merged.body,
        Value::Null,
        "Gitea's merge answers an empty body"
    );
    let main = forge.branch("main").expect("main");
    let parents = git_ok(
        forge.bare_path(),
        &["rev-parse", &format!("{main}^1"), &format!("{main}^2")],
    );
    assert_eq!(parents, format!("{base}\n{first}"));
    let after = api.call("GET", "/repos/acme/app/pulls/1", None).await;
    assert_eq!(after.body["merged"], true);
    assert_eq!(after.body["merge_commit_sha"], main.as_str());
    let twice = api
        .call("POST", "/repos/acme/app/pulls/1/merge", Some(shown))
        .await;
    assert_eq!(twice.status, 405);
}

#[tokio::test]
async fn forgejo_rebase_fast_forwards_and_fast_forward_only_refuses_a_diverged_head() {
    let seed = seed();
    let forge = Forge::start(Kind::Forgejo, "acme", "app", TOKEN, Some(seed.path()));
    let api = Api::new(&forge, "token");
    let head = commit_on(seed.path(), "feature", "a.txt", b"a\n");
    git_ok(
        seed.path(),
        &["push", "--quiet", &forge.clone_url_with_token(), "feature"],
    );
    let pr = json!({ "title": "a", "head": "feature", "base": "main" });
    assert_eq!(
        api.call("POST", "/repos/acme/app/pulls", Some(pr))
            .await
            .status,
        201
    );
    let rebase = json!({ "Do": "rebase", "head_commit_id": head });
    assert_eq!(
        api.call("POST", "/repos/acme/app/pulls/1/merge", Some(rebase))
            .await
            .status,
        200
    );
    assert_eq!(
        forge.branch("main"),
        Some(head),
        "nothing to replay: the base moves forward"
    );

    git_ok(seed.path(), &["checkout", "--quiet", "main"]);
    let other = commit_on(seed.path(), "other", "b.txt", b"b\n");
    git_ok(
        seed.path(),
        &["push", "--quiet", &forge.clone_url_with_token(), "other"],
    );
    let pr = json!({ "title": "b", "head": "other", "base": "main" });
    assert_eq!(
        api.call("POST", "/repos/acme/app/pulls", Some(pr))
            .await
            .status,
        201
    );
    let before = forge.branch("main");
    let fast = json!({ "Do": "fast-forward-only", "head_commit_id": other });
    let refused = api
        .call("POST", "/repos/acme/app/pulls/2/merge", Some(fast))
        .await;
    assert_eq!(refused.status, 500, "{}", refused.body);
    assert_eq!(forge.branch("main"), before);
    forge.allow_merge_methods(&["squash"]);
    let merge = json!({ "Do": "merge" });
    let disallowed = api
        .call("POST", "/repos/acme/app/pulls/2/merge", Some(merge))
        .await;
    assert_eq!(disallowed.status, 405);
}
