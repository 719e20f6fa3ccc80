//! What the bot writes in Discord, as pure functions: the forum post's title, the status
//! board, and text cut to Discord's limits on a character boundary.

use std::time::Duration;

use super::inert;
use crate::config::Locale;
use crate::pipeline::State;
use crate::say;
use crate::store::{Sprint, Usage};

/// Discord's limits (counted here in UTF-16 code units, the stricter reading).
pub const MAX_CONTENT: usize = 2000;
pub const MAX_THREAD_NAME: usize = 100;
pub const MAX_EPHEMERAL: usize = 2000;

/// `text` cut to at most `max` UTF-16 code units, on a character boundary, with `…` when
/// something was cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.encode_utf16().count() <= max {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.len_utf16();
        if used + w > max.saturating_sub(1) {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// `SPRINT-001 · <goal>`, cut to Discord's 100 characters.
pub fn thread_title(sprint_id: &str, goal: &str) -> String {
    let goal: String = goal.split_whitespace().collect::<Vec<_>>().join(" ");
    cut(&format!("{sprint_id} · {goal}"), MAX_THREAD_NAME)
}

/// A stage is labelled by its sister's emoji and work (`🦊 기획`); the other states here.
fn state_label(state: State, locale: Locale) -> String {
    if let Some(stage) = state.stage() {
        let emoji = stage.actor().emoji();
        return format!(
            "{emoji} {}",
            crate::notify::messages::stage_name(stage, locale)
        );
    }
    match state {
        State::Queued => say!(locale, ko: "대기", en: "queued"),
        State::Verifying => say!(locale,
            ko: "🧪 PR의 CI 검사 대기",
            en: "🧪 the pull request's checks run"),
        State::Done => say!(locale,
            ko: "✅ 완료 (배포 승인 대기)",
            en: "✅ done (waiting for deploy approval)"),
        State::Merging => say!(locale,
            ko: "🔀 승인됨: PR 병합 중",
            en: "🔀 approved: its pull request is being merged"),
        State::Deployed => say!(locale, ko: "🎉 배포 완료", en: "🎉 deployed"),
        State::Escalated => say!(locale, ko: "🚨 확인 필요", en: "🚨 needs a human"),
        State::Aborted => say!(locale, ko: "🛑 중단", en: "🛑 aborted"),
        // The stages, labelled above.
        _ => state.as_str().to_string(),
    }
}

/// The state as the board names it: its label, and the state's own name after it when
/// the label does not already say it (`⚙️ 구현 (implementing)`, `🔍 reviewing`).
fn stage_text(state: State, locale: Locale) -> String {
    let label = state_label(state, locale);
    let name = state.to_string();
    if label.contains(&name) {
        label
    } else {
        format!("{label} ({name})")
    }
}

/// The status board: the forum post's first message, edited in place.
pub fn board(
    sprint: &Sprint,
    last_verdict: Option<&str>,
    spend: &Usage,
    locale: Locale,
    max_attempts: u32,
    now_ms: i64,
) -> String {
    let by_sister: Vec<String> = spend
        .by_sister
        .iter()
        .filter(|(_, s)| s.cost_usd > 0.0)
        .map(|(sister, s)| format!("{sister} ${:.2}", s.cost_usd))
        .collect();
    let spend = if by_sister.is_empty() {
        format!("${:.2}", spend.total.cost_usd)
    } else {
        format!("${:.2} ({})", spend.total.cost_usd, by_sister.join(" · "))
    };
    let elapsed =
        Duration::from_secs(u64::try_from((now_ms - sprint.created_at).max(0) / 1000).unwrap_or(0));
    let elapsed = humantime::format_duration(elapsed).to_string();
    let verdict = last_verdict.unwrap_or("—");
    // A sister may name the branch: it is its text, not a code span it could close.
    let branch = inert::line(&sprint.branch);
    let (id, goal, stage) = (
        &sprint.id,
        sprint.goal.trim(),
        stage_text(sprint.state, locale),
    );
    let (round, attempt) = (sprint.round, sprint.attempt);
    let text = say!(locale,
        ko: "**{id} · {goal}**\n단계: {stage}\n라운드: {round} · 시도: {attempt}/{max_attempts}\n브랜치: {branch}\n경과: {elapsed}\n비용: {spend}\n마지막 판정: {verdict}",
        en: "**{id} · {goal}**\nStage: {stage}\nRound: {round} · Attempt: {attempt}/{max_attempts}\nBranch: {branch}\nElapsed: {elapsed}\nSpend: {spend}\nLast verdict: {verdict}");
    // A stage waiting to run again (a usage-limit pause, a retry's backoff) says when.
    let text = match sprint
        .next_run_at
        .filter(|&at| at > now_ms && sprint.state.stage().is_some())
    {
        Some(at) => {
            let when = crate::notify::messages::clock_time(at);
            say!(locale, ko: "{text}\n다시 시작: {when}", en: "{text}\nRuns again: {when}")
        }
        None => text,
    };
    cut(&text, MAX_CONTENT)
}

/// The context of a sprint's lines as Discord shows them: the sisters' words in them are
/// inert.
pub fn line_context<'a>(
    config: &'a crate::config::Config,
    sprint: &'a Sprint,
) -> crate::notify::Context<'a> {
    crate::notify::Context {
        agent_text: inert::line,
        person,
        ..crate::notify::Context::new(config, sprint)
    }
}

/// A person as a Discord message names them: a Discord user as a mention (it pings no one:
/// the message allows no mention but the configured user's, on the lines that ping them),
/// anyone else as recorded (`cli:ops@build`, `forge:octocat`).
pub fn person(by: &str) -> String {
    match by.strip_prefix("discord:") {
        Some(id) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => format!("<@{id}>"),
        _ => by.to_string(),
    }
}

/// The board's line of what the running sister does now (its latest step, the run's
/// elapsed time, tokens and cost so far): the sprint's run still going, if it told a step.
pub fn now_line(runs: &[crate::store::Run], locale: Locale, now_ms: i64) -> Option<String> {
    let run = runs.iter().rev().find(|r| r.ended_at.is_none())?;
    let live = run.live.as_ref()?;
    // The step is the agent's (a command it runs, its last line of text).
    let live = crate::store::RunLive {
        step: live.step.as_deref().map(inert::line),
        ..live.clone()
    };
    let now = crate::notify::messages::now_text(&live, run.started_at, now_ms)?;
    Some(say!(locale, ko: "지금: {now}", en: "Now: {now}"))
}

/// What the forge's checks said at the sprint's base (the team's bar), for the summary and
/// the board: `**CI at base** `2fe1b2e`: ✅ static · ✅ tests (3.10)`.
pub fn base_ci_line(commit: &str, checks: &[crate::store::BaseCheck], locale: Locale) -> String {
    let short = commit.get(..7).unwrap_or(commit);
    let each: Vec<String> = checks
        .iter()
        .map(|c| format!("{} {}", c.mark(), inert::line(&c.name)))
        .collect();
    let each = match each.is_empty() {
        true => say!(locale, ko: "보고된 검사 없음", en: "no check reported"),
        false => each.join(" · "),
    };
    say!(locale, ko: "**기준 CI** `{short}`: {each}", en: "**CI at base** `{short}`: {each}")
}

/// The line the project's check posts when it ends: how long it took when it passed, its
/// last line of output (or how it ended) when it failed.
pub fn check_line(check: &crate::store::CheckRecord, locale: Locale) -> String {
    let took = humantime::format_duration(Duration::from_secs(
        u64::try_from(check.duration_ms.max(0) / 1000).unwrap_or(0),
    ));
    if check.passed() {
        return say!(locale, ko: "🧪 검사 통과 ({took})", en: "🧪 check passed in {took}");
    }
    let last = check
        .output_tail
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(inert::line);
    let why = match (last, check.exit_code) {
        (Some(last), _) => last,
        (None, Some(code)) => say!(locale, ko: "종료 코드 {code}", en: "exit code {code}"),
        (None, None) => say!(locale,
            ko: "중단됨 (시간 초과 또는 실행 불가)",
            en: "stopped (timed out or could not run)"),
    };
    say!(locale, ko: "❌ 검사 실패: {why}", en: "❌ check failed: {why}")
}

/// A command's author as Discord shows it: a Discord user as their mention (the board is
/// sent with no mention allowed, so it names them without a ping), a CLI user as
/// `user@host (CLI)`.
pub fn author(by: &str) -> String {
    match by.split_once(':') {
        Some(("discord", id)) if id.parse::<u64>().is_ok() => format!("<@{id}>"),
        Some(("cli", who)) => format!("`{}` (CLI)", who.replace('`', "'")),
        _ => format!("`{}`", by.replace('`', "'")),
    }
}

/// The board's line of who started the sprint and who steered it (the commands applied,
/// the latest five); `None` when nothing is on record.
pub fn people_line(
    started_by: Option<&str>,
    commands: &[crate::store::Command],
    locale: Locale,
) -> Option<String> {
    use crate::store::{CommandKind, CommandStatus};
    let mut parts = Vec::new();
    if let Some(by) = started_by {
        let who = author(by);
        parts.push(say!(locale, ko: "시작 {who}", en: "started by {who}"));
    }
    let applied: Vec<&crate::store::Command> = commands
        .iter()
        .filter(|c| c.status == CommandStatus::Applied)
        .collect();
    for c in &applied[applied.len().saturating_sub(5)..] {
        let who = author(&c.by);
        parts.push(match c.kind {
            CommandKind::Approve => {
                say!(locale, ko: "배포 승인 {who}", en: "deploy approved by {who}")
            }
            CommandKind::ApproveCi => say!(locale,
                ko: "CI 실행 허락 {who}",
                en: "CI let run by {who}"),
            CommandKind::RequestChanges => say!(locale,
                ko: "변경 요청 {who}",
                en: "changes requested by {who}"),
            CommandKind::Resume => say!(locale, ko: "재개 {who}", en: "resumed by {who}"),
            CommandKind::Abort => say!(locale, ko: "중단 {who}", en: "aborted by {who}"),
            CommandKind::Handoff => say!(locale, ko: "핸드오프 {who}", en: "handed off by {who}"),
            CommandKind::Note => say!(locale, ko: "메모 {who}", en: "note by {who}"),
        });
    }
    if parts.is_empty() {
        return None;
    }
    let parts = parts.join(" · ");
    Some(say!(locale, ko: "사람: {parts}", en: "People: {parts}"))
}

/// The board's line of the sprint's contract: each item's id with the latest review's
/// mark (none before a review). `None` when the plan had no checklist.
pub fn contract_line(
    runs: &[crate::store::Run],
    log: &[crate::store::TransitionRecord],
    locale: Locale,
) -> Option<String> {
    let contract = crate::store::contract_results(runs, log);
    if contract.is_empty() {
        return None;
    }
    // A board has room for a glance; the whole contract is in `sprint log`.
    const SHOWN: usize = 20;
    let mut items: Vec<String> = contract
        .iter()
        .take(SHOWN)
        .map(|c| {
            let id = inert::line(&c.item.id);
            match c.passed {
                Some(_) => format!("{} {id}", crate::report::contract_mark(c.passed)),
                None => id,
            }
        })
        .collect();
    if contract.len() > SHOWN {
        let more = contract.len() - SHOWN;
        items.push(say!(locale, ko: "… 외 {more}개", en: "… {more} more"));
    }
    let (n, items) = (contract.len(), items.join(" · "));
    Some(say!(locale, ko: "계약 ({n}): {items}", en: "Contract ({n}): {items}"))
}

/// The board's line of the reviewer's parallel reviewers, when it has several: where each stands in the
/// round under way (or its verdict). `None` without reviewers' runs in the round.
pub fn reviewers_line(runs: &[crate::store::Run], locale: Locale) -> Option<String> {
    let mut latest: std::collections::BTreeMap<&str, &crate::store::Run> =
        std::collections::BTreeMap::new();
    for run in crate::store::review_round(runs) {
        if let Some(name) = run.reviewer.as_deref() {
            latest.insert(name, run);
        }
    }
    if latest.is_empty() {
        return None;
    }
    let standing: Vec<String> = latest
        .iter()
        .map(|(name, run)| {
            let verdict = run
                .message
                .as_ref()
                .and_then(|m| m.get("verdict")?.as_str().map(str::to_string));
            let what = match (run.outcome, verdict) {
                (None, _) => say!(locale, ko: "⏳ 리뷰 중", en: "⏳ reviewing"),
                (Some(crate::sister::RunOutcome::Handoff), Some(v)) => format!("✔️ {v}"),
                (Some(outcome), _) => format!("⚠️ {outcome}"),
            };
            format!("{name} {what}")
        })
        .collect();
    let standing = standing.join(" · ");
    Some(say!(locale, ko: "리뷰어: {standing}", en: "Reviewers: {standing}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_is_named_once_in_english_and_in_both_in_korean() {
        assert_eq!(stage_text(State::Reviewing, Locale::En), "🔍 reviewing");
        assert_eq!(
            stage_text(State::Escalated, Locale::En),
            "🚨 needs a human (escalated)"
        );
        assert_eq!(
            stage_text(State::Reviewing, Locale::Ko),
            "🔍 리뷰 (reviewing)"
        );
    }

    #[test]
    fn cuts_on_a_character_boundary_within_the_limit() {
        let goal = "가".repeat(150);
        let title = thread_title("SPRINT-001", &goal);
        assert!(title.encode_utf16().count() <= MAX_THREAD_NAME);
        assert!(title.starts_with("SPRINT-001 · 가가"));
        assert!(title.ends_with('…'));
        let emoji = "🚀".repeat(1500);
        let cut_text = cut(&emoji, MAX_CONTENT);
        assert!(cut_text.encode_utf16().count() <= MAX_CONTENT);
        assert!(cut_text.chars().rev().skip(1).all(|c| c == '🚀'));
        assert_eq!(cut("short", 10), "short");
    }

    #[test]
    fn the_now_line_shows_the_running_runs_step_elapsed_tokens_and_cost() {
        use crate::domain::Stage;
        use crate::store::{Run, RunLive};
        let mut done = Run::sample(Stage::Implementing.actor(), None, 1, 1, 0);
        done.ended_at = Some(5_000);
        done.live = Some(RunLive {
            step: Some("✏️ Edit old.rs".into()),
            ..RunLive::default()
        });
        assert_eq!(
            now_line(std::slice::from_ref(&done), Locale::En, 9_000),
            None
        );
        let mut running = Run::sample(Stage::Implementing.actor(), None, 2, 1, 10_000);
        assert_eq!(
            now_line(&[done.clone(), running.clone()], Locale::En, 75_000),
            None
        );
        running.live = Some(RunLive {
            step: Some("▶️ echo @everyone".into()),
            step_at: Some(70_000),
            input_tokens: 1200,
            output_tokens: 34,
            cost_usd: Some(0.0712),
        });
        assert_eq!(
            now_line(&[done, running], Locale::En, 75_000).as_deref(),
            Some("Now: ▶️ echo @\u{200B}everyone · 1m 5s · 1234 tokens · $0.07")
        );
    }

    /// What a sister wrote on the board (its step, the contract's ids, a branch it named)
    /// is text: no link, bold, spoiler or bidi control of its own; the person's goal
    /// keeps its formatting.
    #[test]
    fn agent_text_on_the_board_is_inert() {
        use crate::domain::Stage;
        use crate::store::{Run, RunLive};
        let mut plan = Run::sample(Stage::Planning.actor(), None, 1, 1, 0);
        plan.ended_at = Some(1_000);
        plan.outcome = Some(crate::sister::RunOutcome::Handoff);
        plan.message = Some(serde_json::json!({
            "actor": "harang", "verdict": "PLAN_READY",
            "payload": {"planDir": "plans", "sprintId": "SPRINT-001", "contractId": "C",
                "checklist": [{"id": "[Approve](https://evil.example)", "text": "x"},
                              {"id": "||C2", "text": "y"}]}
        }));
        let mut running = Run::sample(Stage::Implementing.actor(), None, 2, 1, 1_000);
        running.live = Some(RunLive {
            step: Some("▶️ echo [Approve](https://evil.example) **LGTM** ||x \u{202E}".into()),
            ..RunLive::default()
        });
        let runs = [plan, running];
        assert_eq!(
            now_line(&runs, Locale::En, 2_000).as_deref(),
            Some(
                "Now: ▶️ echo \\[Approve\\](https\\://evil.example) \\*\\*LGTM\\*\\* \\|\\|x <U+202E> · 1s"
            )
        );
        assert_eq!(
            contract_line(&runs, &[], Locale::En).as_deref(),
            Some("Contract (2): \\[Approve\\](https\\://evil.example) · \\|\\|C2")
        );
        let sprint = Sprint {
            goal: "Add **the** login page".into(),
            branch: "feature/`x`||\u{202E}".into(),
            ..Sprint::sample(State::Implementing)
        };
        let board = board(&sprint, None, &Usage::default(), Locale::En, 3, 0);
        assert!(
            board.starts_with("**SPRINT-001 · Add **the** login page**\n"),
            "{board}"
        );
        assert!(
            board.contains("\nBranch: feature/\\`x\\`\\|\\|<U+202E>\n"),
            "{board}"
        );
    }

    #[test]
    fn the_check_line_says_how_long_it_took_or_its_last_line() {
        use crate::store::CheckRecord;
        let mut check = CheckRecord {
            run_id: "SPRINT-001-R02".into(),
            command: vec!["cargo".into(), "test".into()],
            head: None,
            exit_code: Some(0),
            duration_ms: 12_400,
            output_tail: "test result: ok\n".into(),
            at: 0,
            at_base: false,
        };
        assert_eq!(check_line(&check, Locale::En), "🧪 check passed in 12s");
        assert_eq!(check_line(&check, Locale::Ko), "🧪 검사 통과 (12s)");
        check.exit_code = Some(101);
        check.output_tail = "running 2 tests\nFAILED <@&42> @here   x  \n\n".into();
        assert_eq!(
            check_line(&check, Locale::En),
            "❌ check failed: FAILED \\<@\u{200B}&42> @\u{200B}here x"
        );
        check.output_tail = String::new();
        assert_eq!(
            check_line(&check, Locale::En),
            "❌ check failed: exit code 101"
        );
        check.exit_code = None;
        assert_eq!(
            check_line(&check, Locale::En),
            "❌ check failed: stopped (timed out or could not run)"
        );
    }

    #[test]
    fn the_people_line_names_the_starter_and_the_steering_applied() {
        use crate::store::{Command, CommandKind, CommandStatus};
        let command = |kind, by: &str, status| Command {
            id: 1,
            sprint_id: "SPRINT-001".into(),
            kind,
            text: None,
            by: by.into(),
            created_at: 0,
            status,
            result: None,
            seq: None,
            mac: None,
            delivered_run: None,
            message: None,
        };
        let commands = [
            command(CommandKind::Approve, "discord:42", CommandStatus::Refused),
            command(
                CommandKind::RequestChanges,
                "cli:ops@build",
                CommandStatus::Applied,
            ),
            command(CommandKind::Approve, "discord:43", CommandStatus::Applied),
        ];
        let line = people_line(Some("discord:7"), &commands, Locale::En).unwrap_or_default();
        assert_eq!(
            line,
            "People: started by <@7> · changes requested by `ops@build` (CLI) · deploy approved by <@43>"
        );
        assert_eq!(people_line(None, &[], Locale::En), None);
    }

    #[test]
    fn a_title_is_one_line() {
        assert_eq!(
            thread_title("SPRINT-002", "fix\nthe   login"),
            "SPRINT-002 · fix the login"
        );
    }
}
