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
use crate::report::evidence::Evidence;

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
fn check_ended(c: &crate::store::CheckRecord, ko: bool) -> String {
    match (c.exit_code, ko) {
        (Some(0), true) => "통과".into(),
        (Some(code), true) => format!("실패 (종료 코드 {code})"),
        (None, true) => "실패 (강제 종료, 종료 코드 없음)".into(),
        (_, false) => crate::report::check_ended(c),
    }
}

/// The check's line: the last check of the branch, and what it said at the base before
/// the sprint when that ran (`❌ at d8a3021 (3 failed) → ✅ at 5fc68ac`).
fn check_line(e: &Evidence, ko: bool) -> String {
    let word = if ko { "검사" } else { "Check" };
    let on_branch: Vec<&crate::store::CheckRecord> =
        e.checks.iter().filter(|c| !c.at_base).collect();
    let runs = match on_branch.len() {
        0 | 1 => String::new(),
        n if ko => format!(" · 총 {n}회"),
        n => format!(" · {n} runs in all"),
    };
    let mark = |c: &crate::store::CheckRecord| if c.passed() { "✅" } else { "❌" };
    let no_git = if ko { "git 없음" } else { "no git" };
    match (&e.base_check, on_branch.last()) {
        (Some(base), last) => {
            let at = |c: &crate::store::CheckRecord| {
                let commit = c.head.as_deref().map_or(no_git, short);
                match ko {
                    true => format!("{} {commit}에서", mark(c)),
                    false => format!("{} at {commit}", mark(c)),
                }
            };
            let head = match last {
                Some(c) if c.passed() => format!("{} ({})", at(c), took(c.duration_ms)),
                Some(c) => format!("{} ({})", at(c), failure(c, ko)),
                None if ko => "브랜치에서는 아직 실행 안 됨".to_string(),
                None => "not yet run on the branch".to_string(),
            };
            let before = match base.passed() {
                true => at(base),
                false => format!("{} ({})", at(base), failure(base, ko)),
            };
            format!(
                "**{word}** {}: {before} → {head}{runs}",
                code(&crate::domain::shell_line(&base.command))
            )
        }
        (None, Some(c)) => format!(
            "**{word}**: {} {} {} ({}, {}){runs}",
            mark(c),
            check_ended(c, ko),
            code(&crate::domain::shell_line(&c.command)),
            took(c.duration_ms),
            c.head.as_deref().map_or(no_git, short),
        ),
        (None, None) if ko => format!("**{word}**: 없음 (프로젝트에 check 설정 없음)"),
        (None, None) => format!("**{word}**: none (the project sets no check)"),
    }
}

/// How a check failed, in a few words: its test runner's count, else its exit.
fn failure(c: &crate::store::CheckRecord, ko: bool) -> String {
    let counted = crate::report::failed_tests(&c.output_tail).filter(|n| *n > 0);
    match (counted, c.exit_code, ko) {
        (Some(n), _, true) => format!("{n}개 실패"),
        (Some(n), _, false) => format!("{n} failed"),
        (None, Some(code), true) => format!("종료 코드 {code}"),
        (None, Some(code), false) => format!("exit code {code}"),
        (None, None, true) => "강제 종료".to_string(),
        (None, None, false) => "killed".to_string(),
    }
}

/// The file holding the whole findings, by name.
pub fn findings_file(sprint_id: &str) -> String {
    format!("{sprint_id}-review.md")
}

pub fn summary(e: &Evidence, locale: Locale) -> Summary {
    let ko = locale == Locale::Ko;
    let s = &e.sprint;
    let mut out = Vec::new();
    out.push(if ko {
        format!("📋 **{} 요약** · 라운드 {}", s.id, s.round)
    } else {
        format!("📋 **{} summary** · round {}", s.id, s.round)
    });
    if let (Some(approved), Some(f)) = (&e.approved, &e.forge) {
        out.push(if ko {
            format!(
                "🔏 승인하면 PR #{}을 리뷰된 커밋 `{}`에서 병합 (그 밖엔 아무것도): {}",
                f.pr,
                short(approved),
                f.url
            )
        } else {
            format!(
                "🔏 Approving merges pull request #{} at `{}` exactly as reviewed, and nothing else: {}",
                f.pr,
                short(approved),
                f.url
            )
        });
    } else if let Some(approved) = &e.approved {
        out.push(if ko {
            format!(
                "🔏 승인하면 리뷰된 커밋 `{}`을 그대로 배포 (그 밖엔 아무것도)",
                short(approved)
            )
        } else {
            format!(
                "🔏 Approving deploys commit `{}` exactly as reviewed, and nothing else",
                short(approved)
            )
        });
    }

    if !e.contract.is_empty() {
        out.push(format!(
            "**{}** ({})",
            if ko { "계약" } else { "Contract" },
            e.contract.len()
        ));
        for c in &e.contract {
            let each: Vec<String> = c
                .reviewers
                .iter()
                .map(|(who, passed)| {
                    format!("{who} {}", crate::report::contract_mark(Some(*passed)))
                })
                .collect();
            let each = if each.is_empty() {
                String::new()
            } else {
                format!(" — {}", each.join(" · "))
            };
            out.push(format!(
                "{} **{}** {}{each}",
                crate::report::contract_mark(c.passed),
                inert::exact_line(&c.item.id),
                inert::exact_line(&c.item.text)
            ));
        }
    }

    out.push(check_line(e, ko));

    match &e.work {
        Some(Ok(w)) => {
            let (added, removed) = w.totals();
            let base = s.base_branch.as_deref().unwrap_or("base");
            let base_commit = s.base_commit.as_deref().map_or("", short);
            let files = if ko {
                format!("파일 {}개", w.diffstat.len())
            } else {
                format!("{} files", w.diffstat.len())
            };
            out.push(format!(
                "**{}** ({}) · {files}, +{added} −{removed} · {} {base_commit} → {} {}",
                if ko { "커밋" } else { "Commits" },
                w.commits.len(),
                inert::line(base),
                inert::line(&s.branch),
                short(&w.head)
            ));
            for (id, subject) in w.commits.iter().take(LISTED) {
                out.push(format!("`{}` {}", short(id), inert::exact_line(subject)));
            }
            if w.commits.len() > LISTED {
                let more = w.commits.len() - LISTED;
                out.push(if ko {
                    format!("… 커밋 {more}개 더 (패치에 있음)")
                } else {
                    format!("… {more} more commits (in the patch)")
                });
            }
            for (file, a, r) in w.diffstat.iter().take(LISTED) {
                out.push(format!("　{} +{a} −{r}", inert::exact_line(file)));
            }
            if w.diffstat.len() > LISTED {
                let more = w.diffstat.len() - LISTED;
                out.push(if ko {
                    format!("　… 파일 {more}개 더 (패치에 있음)")
                } else {
                    format!("　… {more} more files (in the patch)")
                });
            }
        }
        Some(Err(why)) => out.push(format!(
            "**{}**: {}",
            if ko { "커밋" } else { "Commits" },
            inert::line(why)
        )),
        None => out.push(if ko {
            "**커밋**: 기준 없음 (git 저장소가 아님)".to_string()
        } else {
            "**Commits**: no base recorded (the workdir is not a git repository)".to_string()
        }),
    }

    let mut whole = Vec::new();
    let mut cut = false;
    if !e.rounds.is_empty() {
        out.push(format!("**{}**", if ko { "리뷰" } else { "Review" }));
    }
    for round in &e.rounds {
        whole.push(if ko {
            format!("## 라운드 {}\n", round.round)
        } else {
            format!("## Round {}\n", round.round)
        });
        if let Some((by, text)) = &round.request {
            whole.push(if ko {
                format!("{by}의 요청:\n\n{text}\n")
            } else {
                format!("Asked by {by}:\n\n{text}\n")
            });
            let line = one_line(text);
            cut |= line != text.trim();
            out.push(format!(
                "{} {} · {}: {}",
                if ko { "라운드" } else { "Round" },
                round.round,
                if ko {
                    format!("{by}의 요청")
                } else {
                    format!("asked by {by}")
                },
                line
            ));
        }
        for v in &round.reviews {
            whole.push(format!("### {} — {}\n", v.reviewer, v.verdict));
            let first = match v.findings.first() {
                Some(f) => {
                    let line = f.line();
                    cut |= v.findings.len() > 1 || line != f.full();
                    let more = match v.findings.len() - 1 {
                        0 => String::new(),
                        n => format!(" (+{n})"),
                    };
                    format!(" — {}{more}", inert::line(&line))
                }
                None => String::new(),
            };
            for f in &v.findings {
                whole.push(format!("- {}\n", inert::file_text(&f.full())));
            }
            out.push(format!(
                "{} {} · {}: {}{first}",
                if ko { "라운드" } else { "Round" },
                round.round,
                v.reviewer,
                v.verdict
            ));
        }
    }
    if cut {
        out.push(format!("📎 {}", findings_file(&s.id)));
    }

    out.push(format!(
        "**{}**",
        if ko {
            "시간과 비용"
        } else {
            "Time and spend"
        }
    ));
    let time = e.time_by_sister();
    let per_sister: Vec<String> = time
        .iter()
        .map(|(sister, ms)| {
            let spend = e.usage.by_sister.get(sister).map_or(0.0, |s| s.cost_usd);
            format!("{sister} {} ${spend:.2}", took(*ms))
        })
        .collect();
    out.push(format!(
        "{} · {} ${:.2}",
        per_sister.join(" · "),
        if ko { "합계" } else { "total" },
        e.usage.total.cost_usd
    ));

    Summary {
        text: out.join("\n"),
        findings: cut.then(|| whole.concat()),
    }
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
