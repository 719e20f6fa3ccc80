//! The summary a sprint's thread gets when it enters `done`, as pure
//! functions of its evidence: the contract with the review's marks, the checks, the
//! commits and diff stat against the base, each round's findings in one line, time and
//! spend per sister — split into messages on line boundaries, never cut silently. What the
//! sisters wrote (items, subjects, file names, findings, the branch) is inert text.

use std::time::Duration;

use super::inert;
use crate::config::Locale;
use crate::domain::short_commit as short;
use crate::notify::messages::one_line;
use crate::report::evidence::{Evidence, Review, Round, Work};
use crate::say;
use crate::store::{CheckRecord, ContractItem, Sprint};

/// Commits and files listed by name; the rest are counted (all of them are in the patch).
const LISTED: usize = 20;

/// The summary's text, and the full findings when a round's line could not hold them.
pub struct Summary {
    pub text: String,
    /// `SPRINT-001-review.md`: every finding of every round, whole.
    pub findings: Option<String>,
}

fn took(ms: i64) -> String {
    let secs = u64::try_from(ms.max(0) / 1000).unwrap_or(0);
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// The operator's text (a command) as code, exactly: in a code span, or, when it holds a
/// backtick that would close one, as plain text escaped.
fn code(text: &str) -> String {
    if text.contains('`') || text.contains('\n') {
        inert::exact_line(text)
    } else {
        format!("`{text}`")
    }
}

/// How a check ended, in the summary's language.
fn check_ended(c: &CheckRecord, l: Locale) -> String {
    match (c.exit_code, l) {
        (Some(0), Locale::Ko) => "통과".into(),
        (Some(code), Locale::Ko) => format!("실패 (종료 코드 {code})"),
        (None, Locale::Ko) => "실패 (강제 종료, 종료 코드 없음)".into(),
        (_, Locale::En) => crate::report::check_ended(c),
    }
}

/// A check's mark: ✅ when it passed, ❌ when it did not.
fn mark(c: &CheckRecord) -> &'static str {
    if c.passed() { "✅" } else { "❌" }
}

/// The commit a check ran at, short (`no git` without one).
fn commit_of(c: &CheckRecord, l: Locale) -> String {
    match c.head.as_deref() {
        Some(head) => short(head).to_string(),
        None => say!(l, ko: "git 없음", en: "no git"),
    }
}

/// A check's mark at its commit (`❌ at d8a3021`).
fn at(c: &CheckRecord, l: Locale) -> String {
    let (sign, commit) = (mark(c), commit_of(c, l));
    say!(l, ko: "{sign} {commit}에서", en: "{sign} at {commit}")
}

/// The check's line: the last check of the branch, and what it said at the base before
/// the sprint when that ran (`❌ at d8a3021 (3 failed) → ✅ at 5fc68ac`).
fn check_line(e: &Evidence, l: Locale) -> String {
    let on_branch: Vec<&CheckRecord> = e.checks.iter().filter(|c| !c.at_base).collect();
    let runs = match on_branch.len() {
        0 | 1 => String::new(),
        n => say!(l, ko: " · 총 {n}회", en: " · {n} runs in all"),
    };
    match (&e.base_check, on_branch.last()) {
        (Some(base), last) => {
            let head = match last {
                Some(c) if c.passed() => format!("{} ({})", at(c, l), took(c.duration_ms)),
                Some(c) => format!("{} ({})", at(c, l), failure(c, l)),
                None => {
                    say!(l, ko: "브랜치에서는 아직 실행 안 됨", en: "not yet run on the branch")
                }
            };
            let before = match base.passed() {
                true => at(base, l),
                false => format!("{} ({})", at(base, l), failure(base, l)),
            };
            let command = code(&crate::domain::shell_line(&base.command));
            say!(l,
                ko: "**검사** {command}: {before} → {head}{runs}",
                en: "**Check** {command}: {before} → {head}{runs}")
        }
        (None, Some(c)) => {
            let (sign, ended) = (mark(c), check_ended(c, l));
            let command = code(&crate::domain::shell_line(&c.command));
            let (time, commit) = (took(c.duration_ms), commit_of(c, l));
            say!(l,
                ko: "**검사**: {sign} {ended} {command} ({time}, {commit}){runs}",
                en: "**Check**: {sign} {ended} {command} ({time}, {commit}){runs}")
        }
        (None, None) => say!(l,
            ko: "**검사**: 없음 (프로젝트에 check 설정 없음)",
            en: "**Check**: none (the project sets no check)"),
    }
}

/// How a check failed, in a few words: its test runner's count, else its exit.
fn failure(c: &CheckRecord, l: Locale) -> String {
    let counted = crate::report::failed_tests(&c.output_tail).filter(|n| *n > 0);
    match (counted, c.exit_code) {
        (Some(n), _) => say!(l, ko: "{n}개 실패", en: "{n} failed"),
        (None, Some(code)) => say!(l, ko: "종료 코드 {code}", en: "exit code {code}"),
        (None, None) => say!(l, ko: "강제 종료", en: "killed"),
    }
}

/// The file holding the whole findings, by name.
pub fn findings_file(sprint_id: &str) -> String {
    format!("{sprint_id}-review.md")
}

/// The done card's summary of `e`, part by part, in the language of `locale`.
pub fn summary(e: &Evidence, locale: Locale) -> Summary {
    let mut out = vec![heading(&e.sprint, locale)];
    out.extend(approval(e, locale));
    out.extend(contract(e, locale));
    out.push(check_line(e, locale));
    out.extend(
        e.checks_at_base
            .as_ref()
            .map(|(base, checks)| crate::discord::render::base_ci_line(base, checks, locale)),
    );
    out.extend(commits(e, locale));
    out.extend(plan(e, locale));
    let (review, findings) = review(e, locale);
    out.extend(review);
    out.extend(spend(e, locale));
    Summary {
        text: out.join("\n"),
        findings,
    }
}

/// The first line: the sprint and its round.
fn heading(s: &Sprint, l: Locale) -> String {
    let (id, round) = (&s.id, s.round);
    say!(l, ko: "📋 **{id} 요약** · 라운드 {round}", en: "📋 **{id} summary** · round {round}")
}

/// What approving does, when a commit was approved: merge its pull request, or deploy it.
fn approval(e: &Evidence, l: Locale) -> Option<String> {
    let approved = short(e.approved.as_deref()?);
    Some(match &e.forge {
        Some(f) => {
            let (pr, url) = (f.pr, &f.url);
            say!(l,
                ko: "🔏 승인하면 PR #{pr}을 리뷰된 커밋 `{approved}`에서 병합 (그 밖엔 아무것도): {url}",
                en: "🔏 Approving merges pull request #{pr} at `{approved}` exactly as reviewed, and nothing else: {url}")
        }
        None => say!(l,
            ko: "🔏 승인하면 리뷰된 커밋 `{approved}`을 그대로 배포 (그 밖엔 아무것도)",
            en: "🔏 Approving deploys commit `{approved}` exactly as reviewed, and nothing else"),
    })
}

/// The contract, when there is one: its items with the review's marks.
fn contract(e: &Evidence, l: Locale) -> Vec<String> {
    if e.contract.is_empty() {
        return Vec::new();
    }
    let n = e.contract.len();
    let mut out = vec![say!(l, ko: "**계약** ({n})", en: "**Contract** ({n})")];
    out.extend(e.contract.iter().map(contract_item));
    out
}

/// One contract item: its mark, id and text, and each reviewer's mark after them.
fn contract_item(c: &ContractItem) -> String {
    let each: Vec<String> = c
        .reviewers
        .iter()
        .map(|(who, passed)| format!("{who} {}", crate::report::contract_mark(Some(*passed))))
        .collect();
    let each = if each.is_empty() {
        String::new()
    } else {
        format!(" — {}", each.join(" · "))
    };
    format!(
        "{} **{}** {}{each}",
        crate::report::contract_mark(c.passed),
        inert::exact_line(&c.item.id),
        inert::exact_line(&c.item.text)
    )
}

/// Where the project keeps its plans in its tree, that the change carries the plan.
fn plan(e: &Evidence, l: Locale) -> Option<String> {
    let dir = code(e.plan_in_tree.as_deref()?);
    Some(say!(l,
        ko: "📝 **기획서**: 프로젝트 설정대로 저장소 안 {dir}에 커밋됨 — 변경과 함께 병합됩니다",
        en: "📝 **Plan**: committed in the tree at {dir}, as the project keeps its plans — it is merged with the change"))
}

/// The commits against the base, or why there are none to show.
fn commits(e: &Evidence, l: Locale) -> Vec<String> {
    match &e.work {
        Some(Ok(w)) => work(&e.sprint, w, l),
        Some(Err(why)) => {
            let why = inert::line(why);
            vec![say!(l, ko: "**커밋**: {why}", en: "**Commits**: {why}")]
        }
        None => vec![say!(l,
            ko: "**커밋**: 기준 없음 (git 저장소가 아님)",
            en: "**Commits**: no base recorded (the workdir is not a git repository)")],
    }
}

/// The work's totals, then its first `LISTED` commits and files by name, the rest counted.
fn work(s: &Sprint, w: &Work, l: Locale) -> Vec<String> {
    let (added, removed) = w.totals();
    let (commits, files) = (w.commits.len(), w.diffstat.len());
    let base = inert::line(s.base_branch.as_deref().unwrap_or("base"));
    let base_commit = s.base_commit.as_deref().map_or("", short);
    let (branch, head) = (inert::line(&s.branch), short(&w.head));
    let mut out = vec![say!(l,
        ko: "**커밋** ({commits}) · 파일 {files}개, +{added} −{removed} · {base} {base_commit} → {branch} {head}",
        en: "**Commits** ({commits}) · {files} files, +{added} −{removed} · {base} {base_commit} → {branch} {head}")];
    for (id, subject) in w.commits.iter().take(LISTED) {
        out.push(format!("`{}` {}", short(id), inert::exact_line(subject)));
    }
    if commits > LISTED {
        let more = commits - LISTED;
        out.push(say!(l, ko: "… 커밋 {more}개 더 (패치에 있음)", en: "… {more} more commits (in the patch)"));
    }
    for (file, a, r) in w.diffstat.iter().take(LISTED) {
        out.push(format!("　{} +{a} −{r}", inert::exact_line(file)));
    }
    if files > LISTED {
        let more = files - LISTED;
        out.push(say!(l, ko: "　… 파일 {more}개 더 (패치에 있음)", en: "　… {more} more files (in the patch)"));
    }
    out
}

/// The review, a line per request and verdict, and the whole findings when one is cut.
fn review(e: &Evidence, l: Locale) -> (Vec<String>, Option<String>) {
    let mut part = ReviewPart::default();
    if !e.rounds.is_empty() {
        part.lines.push(say!(l, ko: "**리뷰**", en: "**Review**"));
    }
    for round in &e.rounds {
        part.round(round, l);
    }
    if part.cut {
        part.lines
            .push(format!("📎 {}", findings_file(&e.sprint.id)));
    }
    (part.lines, part.cut.then(|| part.whole.concat()))
}

/// The review being written: the card's lines, and every finding whole beside them.
#[derive(Default)]
struct ReviewPart {
    lines: Vec<String>,
    whole: Vec<String>,
    /// A line left something out: the whole findings go with the card.
    cut: bool,
}

impl ReviewPart {
    /// A round: what the person asked for, then each reviewer's verdict.
    fn round(&mut self, round: &Round, l: Locale) {
        let n = round.round;
        self.whole
            .push(say!(l, ko: "## 라운드 {n}\n", en: "## Round {n}\n"));
        if let Some((by, text)) = &round.request {
            self.request(n, by, text, l);
        }
        for v in &round.reviews {
            self.verdict(n, v, l);
        }
    }

    /// What the person asked for the round, in one line.
    fn request(&mut self, n: u32, by: &str, text: &str, l: Locale) {
        self.whole
            .push(say!(l, ko: "{by}의 요청:\n\n{text}\n", en: "Asked by {by}:\n\n{text}\n"));
        let line = one_line(text);
        self.cut |= line != text.trim();
        self.lines.push(say!(l,
            ko: "라운드 {n} · {by}의 요청: {line}",
            en: "Round {n} · asked by {by}: {line}"));
    }

    /// A reviewer's verdict, with its first finding in one line and how many more.
    fn verdict(&mut self, n: u32, v: &Review, l: Locale) {
        self.whole
            .push(format!("### {} — {}\n", v.reviewer, v.verdict));
        let first = match v.findings.first() {
            Some(f) => {
                let line = f.line();
                self.cut |= v.findings.len() > 1 || line != f.full();
                let more = match v.findings.len() - 1 {
                    0 => String::new(),
                    others => format!(" (+{others})"),
                };
                format!(" — {}{more}", inert::line(&line))
            }
            None => String::new(),
        };
        for f in &v.findings {
            self.whole
                .push(format!("- {}\n", inert::file_text(&f.full())));
        }
        let (reviewer, verdict) = (&v.reviewer, &v.verdict);
        self.lines.push(say!(l,
            ko: "라운드 {n} · {reviewer}: {verdict}{first}",
            en: "Round {n} · {reviewer}: {verdict}{first}"));
    }
}

/// Time and spend per sister, and the total spend.
fn spend(e: &Evidence, l: Locale) -> [String; 2] {
    let time = e.time_by_sister();
    let per_sister: Vec<String> = time
        .iter()
        .map(|(sister, ms)| {
            let spend = e.usage.by_sister.get(sister).map_or(0.0, |s| s.cost_usd);
            format!("{sister} {} ${spend:.2}", took(*ms))
        })
        .collect();
    let (per_sister, total) = (per_sister.join(" · "), e.usage.total.cost_usd);
    [
        say!(l, ko: "**시간과 비용**", en: "**Time and spend**"),
        say!(l, ko: "{per_sister} · 합계 ${total:.2}", en: "{per_sister} · total ${total:.2}"),
    ]
}

/// `text` in messages of at most `max` UTF-16 code units, split between lines; a line
/// longer than a message is split between characters. Nothing is left out.
pub fn split(text: &str, max: usize) -> Vec<String> {
    let mut messages = Vec::new();
    let mut current = String::new();
    let mut used = 0;
    for line in text.trim_end_matches('\n').split('\n') {
        let width = line.encode_utf16().count();
        let needed = if current.is_empty() { width } else { width + 1 };
        if used + needed <= max {
            if !current.is_empty() {
                current.push('\n');
            }
            current.push_str(line);
            used += needed;
            continue;
        }
        if !current.is_empty() {
            messages.push(std::mem::take(&mut current));
            used = 0;
        }
        if width <= max {
            current.push_str(line);
            used = width;
            continue;
        }
        for c in line.chars() {
            if used + c.len_utf16() > max {
                messages.push(std::mem::take(&mut current));
                used = 0;
            }
            current.push(c);
            used += c.len_utf16();
        }
    }
    if !current.trim().is_empty() {
        messages.push(current);
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::{inert, split, summary};
    use crate::config::Locale;
    use crate::handoff::message::ChecklistItem;
    use crate::pipeline::State;
    use crate::report::evidence::{Evidence, Finding, Review, Round, Work};
    use crate::store::{ContractItem, Sprint, Usage};

    /// A sprint whose sisters wrote links, bold, spoilers, a heading, a quote, a code fence
    /// and bidi controls into its item, commit subject, file name and finding.
    fn written_by_an_attacker() -> Evidence {
        Evidence {
            sprint: Sprint {
                base_branch: Some("main".into()),
                base_commit: Some("a".repeat(40)),
                ..Sprint::sample(State::Done)
            },
            runs: Vec::new(),
            usage: Usage::default(),
            checks: Vec::new(),
            base_check: None,
            approved: None,
            forge: None,
            plan_in_tree: None,
            waiting: None,
            checks_at_base: None,
            contract: vec![ContractItem {
                item: ChecklistItem {
                    id: "C1".into(),
                    text: "[Approve here](https://evil.example/approve) **LGTM** ||".into(),
                },
                passed: Some(true),
                reviewers: Vec::new(),
            }],
            rounds: vec![Round {
                round: 1,
                request: None,
                reviews: vec![Review {
                    reviewer: "darang".into(),
                    verdict: "REQUEST_CHANGES".into(),
                    findings: vec![Finding {
                        severity: "major".into(),
                        place: "src/a.rs:1".into(),
                        message: "# Approved\n> quote\n<https://evil.example>\n```\ncode\n```"
                            .into(),
                    }],
                }],
            }],
            work: Some(Ok(Work {
                head: "b".repeat(40),
                commits: vec![("c".repeat(40), "|| closes it \u{202E}txt.exe".into())],
                diffstat: vec![("__init__.py".into(), 1, 0)],
            })),
        }
    }

    #[test]
    fn what_the_sisters_wrote_is_inert_on_the_card_and_in_review_md() {
        let s = summary(&written_by_an_attacker(), Locale::En);
        for line in [
            "✅ **C1** \\[Approve here\\](https\\://evil.example/approve) \\*\\*LGTM\\*\\* \\|\\|",
            "**Commits** (1) · 1 files, +1 −0 · main aaaaaaa → feature/sprint-001 bbbbbbb",
            "`ccccccc` \\|\\| closes it <U+202E>txt.exe",
            "　\\_\\_init\\_\\_.py +1 −0",
            "Round 1 · darang: REQUEST_CHANGES — \\[major\\] src/a.rs:1 # Approved > quote \\<https\\://evil.example> \\`\\`\\` code \\`\\`\\`",
        ] {
            assert!(
                s.text.lines().any(|l| l == line),
                "{line:?} not in\n{}",
                s.text
            );
        }
        // The spoiler opened in the item and closed in the subject hides nothing, and no
        // link or bidi control is live: only the bot's own bold and code spans are.
        assert_eq!(inert::live(&s.text), ["bold", "code"], "{}", s.text);
        assert_eq!(
            s.findings.as_deref(),
            Some(
                "## Round 1\n### darang — REQUEST_CHANGES\n- \\[major\\] src/a.rs:1 # Approved\n\\> quote\n\\<https\\://evil.example>\n\\`\\`\\`\ncode\n\\`\\`\\`\n"
            )
        );
    }

    #[test]
    fn the_check_line_reads_from_the_base_to_the_branch() {
        use crate::store::CheckRecord;
        let check = |head: char, exit_code: i32, tail: &str, at_base: bool| CheckRecord {
            run_id: "SPRINT-001-R01".into(),
            command: vec![
                "sh".into(),
                "-c".into(),
                "cargo fmt --check && cargo test".into(),
            ],
            head: Some(head.to_string().repeat(40)),
            exit_code: Some(exit_code),
            duration_ms: 12_400,
            output_tail: tail.into(),
            at: 0,
            at_base,
        };
        let base = check(
            'd',
            101,
            "test result: FAILED. 9 passed; 3 failed; 0 ignored",
            true,
        );
        let mut e = written_by_an_attacker();
        e.base_check = Some(base.clone());
        e.checks = vec![
            base.clone(),
            check('e', 1, "Diff in src/lib.rs", false),
            check('f', 0, "test result: ok. 12 passed; 0 failed", false),
        ];
        let line = |e: &Evidence, locale| {
            let s = summary(e, locale);
            let found = s
                .text
                .lines()
                .find(|l| l.starts_with("**Check") || l.starts_with("**검사"));
            found.map(str::to_string).unwrap_or_default()
        };
        assert_eq!(
            line(&e, Locale::En),
            "**Check** `sh -c 'cargo fmt --check && cargo test'`: ❌ at ddddddd (3 failed) → ✅ at fffffff (12s) · 2 runs in all"
        );
        assert_eq!(
            line(&e, Locale::Ko),
            "**검사** `sh -c 'cargo fmt --check && cargo test'`: ❌ ddddddd에서 (3개 실패) → ✅ fffffff에서 (12s) · 총 2회"
        );
        // A failure with no count says its exit; a base that passed says only that.
        e.checks.pop();
        assert!(
            line(&e, Locale::En).ends_with("→ ❌ at eeeeeee (exit code 1)"),
            "{}",
            line(&e, Locale::En)
        );
        e.base_check = Some(check('d', 0, "", true));
        e.checks = vec![check('f', 0, "", false)];
        assert!(
            line(&e, Locale::En).ends_with(": ✅ at ddddddd → ✅ at fffffff (12s)"),
            "{}",
            line(&e, Locale::En)
        );
    }

    #[test]
    fn split_keeps_every_line_and_stays_within_the_limit() {
        let text: String = (0..5000).map(|i| format!("finding {i}\n")).collect();
        let parts = split(&text, 2000);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|p| p.encode_utf16().count() <= 2000));
        assert_eq!(parts.join("\n"), text.trim_end_matches('\n'));
    }

    #[test]
    fn a_line_longer_than_a_message_is_split_not_cut() {
        let line = "가".repeat(4500);
        let parts = split(&line, 2000);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts.concat(), line);
    }
}
