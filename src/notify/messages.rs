//! The words the user reads, one line per transition, in the design's style:
//! Korean by default, English by config. The console and the Discord bridge both print
//! these lines; only the Discord bridge turns `mention` into a ping, and it makes the
//! sisters' words in them inert (`Context::agent_text`).

use std::time::Duration;

use crate::config::{Config, Locale};
use crate::domain::{Actor, Verdict, short_commit};
use crate::pipeline::fsm::{Escalation, Note};
use crate::pipeline::{Event, Stage, State};
use crate::say;
use crate::store::{Sprint, TransitionRecord};

/// One line for one transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    /// The user is mentioned: only on escalation and when the sprint is done.
    pub mention: bool,
}

/// What a line needs to know about its sprint besides the transition.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub sprint_id: &'a str,
    pub branch: &'a str,
    pub locale: Locale,
    pub nickname: &'a str,
    pub max_attempts: u32,
    /// How the line puts words a sister wrote (a reason, an error, a branch it named): on
    /// one line (`one_line`) for a terminal, which escapes the whole line as it prints it;
    /// Discord's bridge also makes them inert for its Markdown (`discord::inert::line`).
    pub agent_text: fn(&str) -> String,
    /// How the line names a person (`discord:ID`, `cli:user@host`): as recorded for a
    /// terminal; Discord's bridge names a Discord user as a mention that pings no one.
    pub person: fn(&str) -> String,
    /// The branch an approval merges into, when the project delivers through its forge
    /// (approving merges rather than deploys).
    pub merges_into: Option<&'a str>,
}

impl<'a> Context<'a> {
    /// The context of one sprint's lines under this config.
    pub fn new(config: &'a Config, sprint: &'a Sprint) -> Context<'a> {
        Context {
            sprint_id: &sprint.id,
            branch: &sprint.branch,
            locale: config.pipeline.locale,
            nickname: config.nickname(),
            max_attempts: config.pipeline.max_attempts,
            agent_text: one_line,
            person: str::to_string,
            merges_into: config
                .projects
                .get(&sprint.project)
                .filter(|p| p.forge.is_some())
                .map(|p| {
                    sprint
                        .base_branch
                        .as_deref()
                        .or(p.base_branch.as_deref())
                        .unwrap_or("the base branch")
                }),
        }
    }

    /// Words a sister wrote, as this line shows them.
    fn agent(&self, text: &str) -> String {
        (self.agent_text)(text)
    }
}

/// The stage as the lines name it (`기획`, `planning`): its sister's work.
pub fn stage_name(stage: Stage, locale: Locale) -> &'static str {
    locale.pick(stage.actor().info().work)
}

/// The sister as the lines name it (`하랑이`, `Harang`).
fn sister(actor: Actor, locale: Locale) -> &'static str {
    locale.pick(actor.info().names)
}

/// "15:00 UTC" (with the date when it is not today's, in UTC: "2026-12-02 15:00 UTC").
pub fn clock_time(at_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(at_ms).unwrap_or(0));
    let stamp = humantime::format_rfc3339_seconds(at).to_string(); // 2026-12-01T15:00:00Z
    let now = std::time::UNIX_EPOCH
        + Duration::from_millis(u64::try_from(crate::clock::now_ms()).unwrap_or(0));
    let today = humantime::format_rfc3339_seconds(now).to_string();
    let (date, time) = (
        stamp.get(..10).unwrap_or(""),
        stamp.get(11..16).unwrap_or(""),
    );
    if today.get(..10) == Some(date) {
        format!("{time} UTC")
    } else {
        format!("{date} {time} UTC")
    }
}

/// "once", "twice", "3 times".
fn times(n: u32) -> String {
    match n {
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}

/// "10ms", "5s", "2m 30s": how long until the next try (whole seconds from one second up).
pub fn short_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// Renders the line for one transition: a note on it speaks first (a usage limit, a retry,
/// an escalation, an approval that no longer holds, a protocol violation), else its move.
pub fn render(t: &TransitionRecord, cx: &Context<'_>) -> Line {
    let plain = |text: String| Line {
        text,
        mention: false,
    };
    if let Event::FellBack {
        agent,
        until_ms,
        next,
        ..
    } = &t.detail
    {
        return plain(fell_back(t, agent, *until_ms, next, cx.locale));
    }
    match &t.note {
        Some(Note::Paused { resume_at_ms, .. }) => {
            let who = stage_sister(t.to, cx.locale);
            let when = clock_time(*resume_at_ms);
            return plain(say!(cx.locale,
                ko: "⏸️ {who} 사용량 한도: {when}에 다시 시작",
                en: "⏸️ {who} hit its usage limit: resumes at {when}"));
        }
        Some(Note::Retry { failure, delay_ms }) => return plain(retry(t, failure, *delay_ms, cx)),
        Some(Note::Escalated { escalation }) => {
            let (id, nickname, what) = (cx.sprint_id, cx.nickname, escalated(escalation, cx));
            return Line {
                text: say!(cx.locale,
                    ko: "🚨 {id} {what}. {nickname} 확인 필요",
                    en: "🚨 {id}: {what}. {nickname}, please take a look"),
                mention: true,
            };
        }
        Some(Note::Moved { reviewed, why }) => {
            let (id, why) = (cx.sprint_id, cx.agent(why));
            let reviewer = sister(Stage::Reviewing.actor(), cx.locale);
            let reviewed = short_commit(reviewed);
            return plain(say!(cx.locale,
                ko: "⚠️ {id} 배포 안 함: 승인된 커밋 {reviewed}가 아님 — {why}. {reviewer}가 다시 리뷰 (`hanarang sprint show {id}`)",
                en: "⚠️ {id} not deployed: what would deploy is not the approved commit {reviewed} — {why}. Back to {reviewer}'s review (`hanarang sprint show {id}`)"));
        }
        Some(Note::ProtocolViolation { reason }) => {
            let (id, reason) = (cx.sprint_id, cx.agent(reason));
            return plain(say!(cx.locale,
                ko: "🛑 {id} 중단: 규약 위반 — {reason}",
                en: "🛑 {id} aborted: protocol violation — {reason}"));
        }
        _ => {}
    }
    moved(t, cx)
}

/// The sister of the stage a transition goes to (the planner's when it goes to none).
fn stage_sister(to: State, l: Locale) -> &'static str {
    sister(to.stage().unwrap_or(Stage::Planning).actor(), l)
}

/// `⏭️ 나랑이: Claude Code 사용량 한도 (15:00 UTC까지), Codex(으)로 계속`.
fn fell_back(t: &TransitionRecord, agent: &str, until_ms: i64, next: &str, l: Locale) -> String {
    let who = stage_sister(t.to, l);
    let (agent, next) = (crate::config::title(agent), crate::config::title(next));
    let when = clock_time(until_ms);
    say!(l,
        ko: "⏭️ {who}: {agent} 사용량 한도 ({when}까지), {next}(으)로 계속",
        en: "⏭️ {who}: {agent} is at its usage limit until {when}; continuing with {next}")
}

/// A failed try that is tried again after `delay_ms`.
fn retry(
    t: &TransitionRecord,
    failure: &crate::pipeline::Failure,
    delay_ms: u64,
    cx: &Context<'_>,
) -> String {
    let l = cx.locale;
    // One of several reviewers retries alone, on its own count.
    let (who, previous) = match &t.detail {
        Event::ReviewerFailed {
            reviewer, attempt, ..
        } => (reviewer_name(reviewer, l), *attempt),
        _ => (
            stage_sister(t.to, l).to_string(),
            t.attempt.saturating_sub(1),
        ),
    };
    let wait = short_duration(Duration::from_millis(delay_ms));
    let (max, kind, reason) = (
        cx.max_attempts,
        failure.kind.as_str(),
        cx.agent(&failure.detail),
    );
    say!(l,
        ko: "⚠️ {who} 실패 (시도 {previous}/{max}): {kind} — {reason}. {wait} 후 다시 시도",
        en: "⚠️ {who} failed (attempt {previous}/{max}): {kind} — {reason}. Retrying in {wait}")
}

/// Why a sprint waits for a person, as its escalation line says it.
fn escalated(escalation: &Escalation, cx: &Context<'_>) -> String {
    let l = cx.locale;
    let implementer = sister(Stage::Implementing.actor(), l);
    let reviewer = sister(Stage::Reviewing.actor(), l);
    match escalation {
        Escalation::AttemptsExhausted {
            stage,
            attempts,
            last,
        } => {
            let (stage, times) = (stage_name(*stage, l), times(*attempts));
            let (kind, detail) = (last.kind.as_str(), cx.agent(&last.detail));
            say!(l,
                ko: "{stage} 단계 {attempts}회 실패 (마지막: {kind} — {detail})",
                en: "{stage} failed {times} (last: {kind} — {detail})")
        }
        Escalation::ReviewRoundsExhausted { rounds } => {
            let s = if *rounds == 1 { "" } else { "s" };
            say!(l,
                ko: "리뷰 라운드 {rounds}회 소진 ({reviewer}가 또 변경 요청)",
                en: "review rounds exhausted after {rounds} round{s} ({reviewer} asked for changes again)")
        }
        Escalation::DeployInterrupted { detail } => {
            let detail = cx.agent(detail);
            say!(l,
                ko: "배포 중 중단되어 결과를 알 수 없음 ({detail})",
                en: "the deploy was interrupted and its outcome is unknown ({detail})")
        }
        Escalation::BudgetExceeded {
            spent_usd,
            limit_usd,
        } => say!(l,
            ko: "예산 초과 (${spent_usd:.2} / 한도 ${limit_usd:.2})",
            en: "over budget (${spent_usd:.2} of ${limit_usd:.2})"),
        Escalation::NoProgress { round, head } => {
            let (head, before) = (short_commit(head), round.saturating_sub(1));
            say!(l,
                ko: "라운드 {round}에서 바뀐 것 없음: head {head}가 라운드 {before}와 같음 ({implementer}가 커밋 없이 IMPL_DONE)",
                en: "round {round} changed nothing: head {head} as in round {before} ({implementer} answered IMPL_DONE with no new commit)")
        }
        Escalation::SameFindings { round } => {
            let before = round.saturating_sub(1);
            say!(l,
                ko: "라운드 {round} 리뷰 지적이 라운드 {before}와 같음 ({reviewer}가 같은 변경 요청 반복)",
                en: "round {round}'s review findings are round {before}'s again ({reviewer} repeated its request)")
        }
        Escalation::ChecksTimedOut { pending } => {
            let pending = cx.agent(&pending.join(", "));
            say!(l,
                ko: "CI 검사가 ci_timeout 안에 끝나지 않음 (대기 중: {pending})",
                en: "the forge's checks were still pending past ci_timeout ({pending})")
        }
        Escalation::ForgeFailed { reason } => {
            let reason = cx.agent(reason);
            say!(l, ko: "포지가 거부함 — {reason}", en: "the forge refused — {reason}")
        }
        Escalation::MergeRefused { reason } => {
            let reason = cx.agent(reason);
            say!(l,
                ko: "포지가 병합을 거부함 — {reason}",
                en: "the forge refused the merge — {reason}")
        }
    }
}

/// The line of a transition with no note of its own: what moved, and who starts next.
fn moved(t: &TransitionRecord, cx: &Context<'_>) -> Line {
    let (l, id, round) = (cx.locale, cx.sprint_id, t.round);
    let plain = |text: String| Line {
        text,
        mention: false,
    };
    let detail = named(&t.detail, cx.person);
    match (&detail, t.from, t.to) {
        (Event::Reviewed { reviewer, verdict }, _, _) => {
            let (emoji, who) = (Stage::Reviewing.actor().emoji(), reviewer_name(reviewer, l));
            plain(say!(l,
                ko: "{emoji} {who} 판정: {verdict} (라운드 {round})",
                en: "{emoji} {who}'s verdict: {verdict} (round {round})"))
        }
        (Event::ReviewMerged { verdicts }, State::Reviewing, State::Implementing) => {
            let asked = said(verdicts, Verdict::RequestChanges);
            let implementer = sister(Stage::Implementing.actor(), l);
            plain(say!(l,
                ko: "🔁 리뷰 종합: 변경 요청 ({asked}) — {implementer}가 라운드 {round} 구현",
                en: "🔁 Reviews merged: changes requested ({asked}) — {implementer} implements round {round}"))
        }
        (Event::Handoff { by, .. }, _, to) => {
            let who = to.stage().map(|s| sister(s.actor(), l)).unwrap_or_default();
            plain(say!(l,
                ko: "🔄 {who} 새 세션으로 교대 (요청: {by})",
                en: "🔄 {who} handed off to a fresh session (asked by {by})"))
        }
        // Into planning, whatever the event (a resume too): the planner starts.
        (_, _, State::Planning) => plain(starts(Stage::Planning, t, cx)),
        (Event::Reported { .. }, State::Reviewing, State::Implementing) => {
            let reviewer = sister(Stage::Reviewing.actor(), l);
            plain(say!(l,
                ko: "🔁 {reviewer} re-review 요청 (라운드 {round})",
                en: "🔁 {reviewer} asks for changes (round {round})"))
        }
        (Event::RequestChanges { by, note }, _, State::Implementing) => {
            let note = one_line(note);
            plain(say!(l,
                ko: "🔁 {by} 변경 요청 (라운드 {round}): {note}",
                en: "🔁 {by} asks for changes (round {round}): {note}"))
        }
        (Event::Resume { by, .. }, _, State::Verifying) => plain(say!(l,
            ko: "▶️ {by}님이 {id} 재개: CI 검사를 다시 기다림",
            en: "▶️ {by} resumed {id}: waiting for the forge's checks again")),
        (Event::Resume { by, .. }, _, State::Done) => plain(say!(l,
            ko: "▶️ {by}님이 {id} 재개: 배포 승인을 다시 기다림",
            en: "▶️ {by} resumed {id}: waiting for the deploy approval again")),
        (Event::CiFilesHeld { head, files }, _, State::Verifying) => {
            let (short, n) = (short_commit(head), files.len());
            let names = cx.agent(&files.join(", "));
            plain(say!(l,
                ko: "🔐 {id}: {short}의 변경이 포지가 실행하는 파일 {n}개를 건드림 ({names}). 사람이 허락할 때까지 푸시하지 않음 (`hanarang sprint approve-ci {id}`)",
                en: "🔐 {id}: the change at {short} touches {n} file(s) the forge runs ({names}); it is not pushed until a person lets them run (`hanarang sprint approve-ci {id}`)"))
        }
        (Event::ApproveCi { by }, _, State::Verifying) => {
            let head = match &t.note {
                Some(Note::CiApproved { head }) => short_commit(head),
                _ => "?",
            };
            plain(say!(l,
                ko: "▶️ {by}님이 CI 파일 실행을 허락: {head}를 푸시",
                en: "▶️ {by} let the CI files run: pushing {head}"))
        }
        (Event::Published { pr, url, head }, _, _) => {
            let head = short_commit(head);
            plain(say!(l,
                ko: "🔗 PR #{pr} ({head}): {url}",
                en: "🔗 Pull request #{pr} at {head}: {url}"))
        }
        (Event::ChecksFailed { failed, .. }, _, State::Implementing) => {
            let names: Vec<&str> = failed.iter().map(|c| c.name.as_str()).collect();
            let implementer = sister(Stage::Implementing.actor(), l);
            let names = cx.agent(&names.join(", "));
            plain(say!(l,
                ko: "🔴 CI 실패: {names} — {implementer}가 라운드 {round} 구현",
                en: "🔴 CI failed: {names} — {implementer} implements round {round}"))
        }
        (Event::ForgeMerged { by, commit }, _, State::Deployed) => {
            plain(merged(id, by.as_deref(), commit.as_deref(), l))
        }
        (Event::Merged { commit, .. }, _, State::Deployed) => {
            plain(merged(id, None, commit.as_deref(), l))
        }
        (Event::Merged { commit, .. }, _, State::Deploying) => {
            let deployer = sister(Stage::Deploying.actor(), l);
            let merged = merged(id, None, commit.as_deref(), l);
            plain(say!(l,
                ko: "{merged} — {deployer}가 병합된 커밋 배포 시작",
                en: "{merged} — {deployer} deploys the merged commit"))
        }
        (Event::Approve { by }, _, State::Merging) => {
            let into = cx.merges_into.unwrap_or("the base branch");
            let c = approved_commit(t).map_or("?", short_commit);
            plain(say!(l,
                ko: "🔏 {by}님 승인: {c}을 {into}에 병합하는 중",
                en: "🔏 {by} approved: merging {c} into {into}"))
        }
        (Event::MergeDelayed { reason }, _, State::Merging) => {
            let reason = one_line(reason);
            plain(say!(l,
                ko: "⏳ {id} 병합 대기: 포지에 닿지 않음 ({reason}). 승인은 유효하며 다시 시도합니다",
                en: "⏳ {id} waits to merge: the forge cannot be reached ({reason}). The approval stands; trying again"))
        }
        (Event::Resume { by, .. }, _, to) => {
            let stage = to.stage().unwrap_or(Stage::Planning);
            let (who, work) = (sister(stage.actor(), l), stage_name(stage, l));
            plain(say!(l,
                ko: "▶️ {by}님이 {id} 재개: {who}가 {work} 다시 시작",
                en: "▶️ {by} resumed {id}: {who} starts {work} again"))
        }
        (Event::Approve { by }, _, State::Deploying) => plain(approved(t, by, l)),
        (_, _, State::Done) => {
            let done = match (approved_commit(t).map(short_commit), cx.merges_into) {
                (Some(c), Some(into)) => say!(l,
                    ko: "✅ {id} 완료. {c}을 {into}에 병합하도록 승인해주세요",
                    en: "✅ {id} is done. Please approve merging {c} into {into}"),
                (Some(c), None) => say!(l,
                    ko: "✅ {id} 완료. {c} 배포 승인해주세요",
                    en: "✅ {id} is done. Please approve deploying {c}"),
                (None, _) => say!(l,
                    ko: "✅ {id} 완료. 배포 승인해주세요",
                    en: "✅ {id} is done. Please approve the deploy"),
            };
            Line {
                text: checks_passed(t, cx) + &done,
                mention: true,
            }
        }
        (_, _, State::Deployed) => plain(say!(l, ko: "🎉 {id} 배포 완료", en: "🎉 {id} deployed")),
        (event, from, State::Aborted) => {
            let why = aborted(event, from, cx);
            plain(say!(l, ko: "🛑 {id} 중단: {why}", en: "🛑 {id} aborted: {why}"))
        }
        (_, _, State::Verifying) => {
            let reviewer = sister(Stage::Reviewing.actor(), l);
            plain(say!(l,
                ko: "📤 {reviewer} 승인: 브랜치를 올리고 PR의 CI 검사를 기다림",
                en: "📤 {reviewer} approved: the branch goes to the forge, and its checks are waited for"))
        }
        // Into a stage: its sister starts.
        (_, from, to) => plain(match to.stage() {
            Some(stage) => starts(stage, t, cx),
            None => format!("{id}: {from} → {to}"),
        }),
    }
}

/// The names of the reviewers whose verdict was `verdict`, as a list.
fn said(verdicts: &std::collections::BTreeMap<String, Verdict>, verdict: Verdict) -> String {
    let names: Vec<&str> = verdicts
        .iter()
        .filter(|(_, v)| **v == verdict)
        .map(|(name, _)| name.as_str())
        .collect();
    names.join(", ")
}

/// A person approved the deploy: the deployer starts, on the commit approved.
fn approved(t: &TransitionRecord, by: &str, l: Locale) -> String {
    let deployer = Stage::Deploying.actor();
    let (emoji, who, deploying) = (
        deployer.emoji(),
        sister(deployer, l),
        stage_name(Stage::Deploying, l),
    );
    match approved_commit(t).map(short_commit) {
        Some(c) => say!(l,
            ko: "{emoji} {by}님 {c} 배포 승인: {who}가 {deploying} 시작",
            en: "{emoji} {by} approved deploying {c}: {who} starts {deploying}"),
        None => say!(l,
            ko: "{emoji} {by}님 배포 승인: {who}가 {deploying} 시작",
            en: "{emoji} {by} approved the deploy: {who} starts {deploying}"),
    }
}

/// Why a sprint was aborted, as its line says it.
fn aborted(event: &Event, from: State, cx: &Context<'_>) -> String {
    let l = cx.locale;
    match event {
        Event::ForgeClosed { by: Some(by) } => say!(l,
            ko: "{by}님이 포지에서 PR을 닫음",
            en: "its pull request was closed on the forge by {by}"),
        Event::ForgeClosed { by: None } => say!(l,
            ko: "포지에서 PR이 닫힘",
            en: "its pull request was closed on the forge"),
        Event::Abort {
            by,
            reason: Some(reason),
        } => {
            let reason = one_line(reason);
            say!(l, ko: "{by}님이 중단 — {reason}", en: "stopped by {by} — {reason}")
        }
        Event::Abort { by, reason: None } => say!(l, ko: "{by}님이 중단", en: "stopped by {by}"),
        Event::Reported { actor, reason, .. } => {
            let who = sister(*actor, l);
            let reason = reason.as_deref().map(|r| cx.agent(r)).unwrap_or_default();
            say!(l, ko: "{who}가 중단 판정 — {reason}", en: "{who} called it off — {reason}")
        }
        Event::ReviewMerged { verdicts } => {
            let who = reviewer_name(&said(verdicts, Verdict::Abort), l);
            say!(l, ko: "{who}가 중단 판정", en: "{who} called it off")
        }
        _ => from.to_string(),
    }
}

/// The event with the people who gave it named as the line shows them.
fn named(event: &Event, person: fn(&str) -> String) -> Event {
    let mut event = event.clone();
    match &mut event {
        Event::Approve { by }
        | Event::RequestChanges { by, .. }
        | Event::Resume { by, .. }
        | Event::Abort { by, .. }
        | Event::Handoff { by, .. } => *by = person(by),
        _ => {}
    }
    event
}

/// `🎉 SPRINT-001 merged as abc1234 by octocat`.
fn merged(id: &str, by: Option<&str>, commit: Option<&str>, l: Locale) -> String {
    let commit = commit.map(short_commit).unwrap_or("?");
    match by {
        Some(by) => say!(l,
            ko: "🎉 {id} 병합됨: {commit} ({by})",
            en: "🎉 {id} merged as {commit} by {by}"),
        None => say!(l, ko: "🎉 {id} 병합됨: {commit}", en: "🎉 {id} merged as {commit}"),
    }
}

/// What the forge's checks said, heading the done line they lead to (`🟢 CI passed: build,
/// test — `); empty for any other move into done.
fn checks_passed(t: &TransitionRecord, cx: &Context<'_>) -> String {
    let Event::ChecksPassed { checks, none, .. } = &t.detail else {
        return String::new();
    };
    let l = cx.locale;
    if *none {
        return say!(l,
            ko: "🟢 CI 없음: 10분 안에 보고된 검사 없음 — ",
            en: "🟢 No CI ran: the forge reported no check within 10 minutes — ");
    }
    if checks.is_empty() {
        return say!(l,
            ko: "🟢 CI를 기다리지 않음 (ci = \"none\") — ",
            en: "🟢 The forge's checks are not waited for (ci = \"none\") — ");
    }
    let checks = cx.agent(&checks.join(", "));
    say!(l, ko: "🟢 CI 통과: {checks} — ", en: "🟢 CI passed: {checks} — ")
}

/// The commit a move into `done` or `deploying` is for, when git told it.
fn approved_commit(t: &TransitionRecord) -> Option<&str> {
    match &t.note {
        Some(Note::Approved { head } | Note::Merged { head, .. }) => Some(head),
        _ => None,
    }
}

/// One of the reviewer's parallel reviewers, as the lines name it.
fn reviewer_name(name: &str, l: Locale) -> String {
    let reviewer = sister(Stage::Reviewing.actor(), l);
    say!(l, ko: "{reviewer} 리뷰어 {name}", en: "{reviewer}'s reviewer {name}")
}

/// A stage's sister starts (`🚀 이랑이가 배포 시작`), with what it starts on where the
/// design's line names it: the sprint planned, the branch, the round.
fn starts(stage: Stage, t: &TransitionRecord, cx: &Context<'_>) -> String {
    let (l, id, actor) = (cx.locale, cx.sprint_id, stage.actor());
    let (emoji, who, work) = (actor.emoji(), sister(actor, l), stage_name(stage, l));
    // The branch of the transition's moment, even when the line is delivered late; a
    // sister may have named it.
    let branch = cx.agent(t.branch.as_deref().unwrap_or(cx.branch));
    let round = t.round;
    match stage {
        Stage::Planning => {
            say!(l, ko: "{emoji} {who}가 {id} {work} 시작", en: "{emoji} {who} starts {work} {id}")
        }
        Stage::Implementing => say!(l,
            ko: "{emoji} {who}가 {work} 시작 ({branch})",
            en: "{emoji} {who} starts {work} ({branch})"),
        Stage::Reviewing => say!(l,
            ko: "{emoji} {who}가 {work} 시작 (라운드 {round})",
            en: "{emoji} {who} starts {work} (round {round})"),
        _ => say!(l, ko: "{emoji} {who}가 {work} 시작", en: "{emoji} {who} starts {work}"),
    }
}

/// Sister-written text on one line, cut so a line stays readable (Discord's own limits are
/// applied by the bridge).
pub fn one_line(text: &str) -> String {
    one_line_cow(text).into_owned()
}

/// `one_line`, borrowing `text` when it is one line already (the usual goal).
pub fn one_line_cow(text: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 300;
    // One line of single spaces and short enough (bytes bound characters): as is.
    // ASCII, the usual case, is judged byte by byte: its white space other than a space
    // is tab, line feed, vertical tab, form feed and carriage return.
    let other_space = if text.is_ascii() {
        text.bytes().any(|b| (b'\t'..=b'\r').contains(&b))
    } else {
        text.chars().any(|c| c.is_whitespace() && c != ' ')
    };
    let flat_already = text.len() <= MAX
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.contains("  ")
        && !other_space;
    if flat_already {
        return std::borrow::Cow::Borrowed(text);
    }
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    std::borrow::Cow::Owned(match flat.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    })
}

/// What a running sister is doing now, as the board and `run`'s status line show it: its
/// latest step, how long its run has gone, the tokens and cost so far. `None` before it
/// told a step.
pub fn now_text(live: &crate::store::RunLive, run_started_at: i64, now_ms: i64) -> Option<String> {
    let step = live.step.as_deref()?;
    let elapsed =
        Duration::from_secs(u64::try_from((now_ms - run_started_at).max(0) / 1000).unwrap_or(0));
    let mut text = format!("{step} · {}", humantime::format_duration(elapsed));
    let tokens = live.input_tokens.saturating_add(live.output_tokens);
    if tokens > 0 {
        text.push_str(&format!(" · {tokens} tokens"));
    }
    if let Some(cost) = live.cost_usd {
        text.push_str(&format!(" · ${cost:.2}"));
    }
    Some(text)
}

/// The status line `run` keeps under the last line on a terminal: who is at work and for
/// how long, or when a waiting retry starts.
pub fn status_line(sprint: &Sprint, cx: &Context<'_>, now_ms: i64) -> Option<String> {
    let stage = sprint.state.stage()?;
    let actor = stage.actor();
    let l = cx.locale;
    let who = format!("{} {}", actor.emoji(), sister(actor, l));
    let since = |ms: i64| Duration::from_secs(u64::try_from(ms.max(0)).unwrap_or(0) / 1000);
    if let Some(at) = sprint.next_run_at.filter(|&at| at > now_ms) {
        let wait = short_duration(Duration::from_millis(
            u64::try_from(at - now_ms).unwrap_or(0),
        ));
        let work = stage_name(stage, l);
        return Some(say!(l,
            ko: "⏳ {who} {work} 재시도 대기 · {wait} 후",
            en: "⏳ {who} waits to retry {work} · in {wait}"));
    }
    let started = sprint.next_run_at.unwrap_or(0).max(sprint.updated_at);
    let elapsed = humantime::format_duration(since(now_ms - started));
    let (round, attempt, max, work) = (
        sprint.round,
        sprint.attempt,
        cx.max_attempts,
        stage_name(stage, l),
    );
    Some(say!(l,
        ko: "{who} {work} 중 · 라운드 {round} · 시도 {attempt}/{max} · {elapsed}",
        en: "{who} {work} · round {round} · attempt {attempt}/{max} · {elapsed}"))
}

/// The words of `run`'s deploy question at the terminal.
pub struct DeployPrompt {
    pub question: String,
    pub what_to_change: String,
    pub note_needed: String,
}

pub fn deploy_prompt(sprint_id: &str, locale: Locale) -> DeployPrompt {
    DeployPrompt {
        question: say!(locale,
            ko: "{sprint_id} 배포할까요? [y] 배포 승인 / [n] 변경 요청 / [a] 중단 / [l] 나중에: ",
            en: "Deploy {sprint_id}? [y] approve / [n] request changes / [a] abort / [l] later: "),
        what_to_change: say!(locale, ko: "무엇을 바꿀까요? ", en: "What should change? "),
        note_needed: say!(locale,
            ko: "변경 요청에는 내용이 필요해요",
            en: "a request for changes needs a note"),
    }
}
