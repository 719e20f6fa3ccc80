//! The role text of a sister's prompt: what its job is in this pipeline, built in (one
//! file per sister under `prompts/`, held by its row in `Actor::info`) or the project's
//! own `prompts/<actor>.md`, with its placeholders filled from the contract file.

use super::ContractFile;
use crate::domain::Stage;
use crate::handoff::message::Actor;
use crate::handoff::quote;
use crate::placeholder;

/// The built-in role text of `actor` (its `prompts/<actor>.md`, as its row in
/// `Actor::info` holds it).
pub fn built_in(actor: Actor) -> &'static str {
    actor.info().prompt
}

/// `template` (the built-in text when `None`) with every prompt placeholder filled.
/// Text a sister or a person wrote (the goal, the contract items) goes in as a quoted
/// block; the project's own texts (instructions, deploy) as they are written.
pub fn render(contract: &ContractFile, template: Option<&str>, contract_path: &str) -> String {
    let c = contract;
    let template = template.unwrap_or_else(|| built_in(c.role));
    let round = c.round.to_string();
    let attempt = c.attempt.to_string();
    let goal = quote::block(
        "goal",
        c.goal_by.as_deref().unwrap_or(super::contract::UNKNOWN),
        c.goal.trim(),
    );
    let base_branch = match &c.base_branch {
        Some(b) => b.clone(),
        None => format!(
            "the branch checked out in {} (no base_branch is configured)",
            c.workdir
        ),
    };
    let base_commit = c
        .base_commit
        .as_deref()
        .unwrap_or("the commit it was at then (not recorded: the workdir is not a git repository)");
    let head = c
        .head
        .as_deref()
        .unwrap_or("its current head (not recorded: the workdir is not a git repository)");
    let checklist = checklist(c);
    let check = match c.check.as_slice() {
        [] => "none is configured for this project".to_string(),
        words => format!(
            "`{}` in {} must exit 0",
            crate::domain::shell_line(words),
            c.workdir
        ),
    };
    let instructions = c
        .instructions
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or("(this project gives none)");
    let deploy = c
        .deploy
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or("(the project does not say: deploy as its own files (README, scripts, CI) describe, and say what you did)");
    let plan_place = plan_place(c);
    let route = route(c, &base_branch);
    let values = [
        ("role", c.role.as_str()),
        ("sister", c.role.korean_name()),
        ("sprint", c.sprint_id.as_str()),
        ("goal", goal.as_str()),
        ("project", c.project.as_str()),
        ("contract", c.contract_id.as_str()),
        ("run", c.run_id.as_str()),
        ("workdir", c.workdir.as_str()),
        ("contract_file", contract_path),
        ("branch", c.branch.as_str()),
        ("base_branch", base_branch.as_str()),
        ("base_commit", base_commit),
        ("head", head),
        ("artifact_dir", c.artifact_dir.as_str()),
        ("plan_dir", c.plan_dir.as_str()),
        ("plan_place", plan_place),
        ("round", round.as_str()),
        ("attempt", attempt.as_str()),
        ("checklist", checklist.as_str()),
        ("instructions", instructions),
        ("deploy", deploy),
        ("check", check.as_str()),
        ("reviewer", c.reviewer.as_deref().unwrap_or("")),
        ("route", route.as_str()),
    ];
    debug_assert!(values.iter().all(|(n, _)| placeholder::PROMPT.contains(n)));
    placeholder::substitute(template, &values)
}

/// Where the work goes after this run: through the project's forge (a pull request onto
/// the base, the team's CI — what it said at the base — and a person's merge), or, with
/// no forge, a person's approval of the deploy. What the role does about it.
fn route(c: &ContractFile, base_branch: &str) -> String {
    let Some(forge) = &c.forge else {
        return "there is no forge: once the review approves, a person approves the deploy, and the deployer deploys the approved commit.".to_string();
    };
    let pr = match (&forge.pr, &forge.url) {
        (Some(n), Some(url)) => format!(" (pull request #{n}: {url})"),
        _ => String::new(),
    };
    let base = c
        .base_commit
        .as_deref()
        .map_or("its base", |b| b.get(..7).unwrap_or(b));
    let checks = match forge.checks_at_base.as_slice() {
        [] => format!("at the base {base} it reported no check (or could not be asked)"),
        checks => {
            let each: Vec<String> = checks
                .iter()
                .map(|k| {
                    let mark = match k.passed() {
                        Some(true) => "passed",
                        Some(false) => "FAILED",
                        None => "pending",
                    };
                    format!("{} {mark} ({})", k.name, k.result)
                })
                .collect();
            format!("at the base {base} its checks said: {}", each.join(", "))
        }
    };
    let duty = match c.role.stage() {
        Stage::Planning => "Plan for those checks: say how the work will pass each one.",
        Stage::Implementing => {
            "Your work must pass those checks: run what you can of them here before you answer."
        }
        Stage::Reviewing => "Hold the work to those checks as well as to the contract.",
        Stage::Deploying => "You deploy what was merged.",
    };
    format!(
        "hanarang (never an agent) pushes {} to {} {} and opens a pull request onto {base_branch}{pr}. The team's CI runs there and is the bar: {checks}. A check that fails there comes back to the implementer with its log, as another round. A person approves, and hanarang merges: nobody pushes or merges by hand. {duty}",
        c.branch, forge.kind, forge.repo
    )
}

/// Where the plan lives and what this role does with it: outside the repository, read
/// there and never copied in (the team's pull request holds only the change); or, where
/// the project keeps plans in its tree, committed by the planner.
fn plan_place(c: &ContractFile) -> &'static str {
    match (c.plan_in_tree, c.role.stage()) {
        (false, Stage::Planning) => {
            "It is this sprint's folder outside the repository, where every sister of the sprint reads it: keep the plan and everything you write to plan (notes, checklists, scripts) there, never in the repository, and commit nothing — the team's pull request holds only the change."
        }
        (false, _) => {
            "It is outside the repository: read it there, and never copy it (or anything of it) into the repository — the team's pull request holds only the change."
        }
        (true, Stage::Planning) => {
            "It is inside the repository (the project keeps its plans in its tree): commit the plan there; it ships with the change."
        }
        (true, _) => "The planner committed it in the repository; do not edit it.",
    }
}

/// The sprint's contract as quoted lists (`- id: text`), each in a block naming who set
/// its items (the plan, or the person who asked), and the rule for a person's request; or
/// a line saying there is none.
fn checklist(c: &ContractFile) -> String {
    if c.checklist.is_empty() {
        return "(no contract items: the plan set none)".to_string();
    }
    let mut groups: Vec<(&str, String)> = Vec::new();
    let mut asked: Vec<&str> = Vec::new();
    for (n, item) in c.checklist.iter().enumerate() {
        let by = c
            .checklist_by
            .get(n)
            .map_or(crate::store::PLANNER, String::as_str);
        if by != crate::store::PLANNER {
            asked.push(item.id.trim());
        }
        let line = format!("- {}: {}\n", item.id.trim(), item.text.trim());
        match groups.last_mut() {
            Some((last, lines)) if *last == by => lines.push_str(&line),
            _ => groups.push((by, line)),
        }
    }
    let mut out: Vec<String> = groups
        .iter()
        .map(|(by, lines)| quote::block("checklist", by, &format!("\n{lines}")))
        .collect();
    if let Some(last) = asked.last() {
        let reported = match c.role.stage() {
            Stage::Reviewing => "report that earlier item as passed, its note naming the request",
            _ => "the reviewer reports that earlier item as passed, its note naming the request",
        };
        out.push(format!(
            "The item{} {} {} what a person asked after the plan, part of the contract like the rest. The person's latest word wins: where a request conflicts with an earlier item, the request holds; {reported} (e.g. \"superseded by {last}\").",
            if asked.len() == 1 { "" } else { "s" },
            asked.join(", "),
            if asked.len() == 1 { "is" } else { "are" },
        ));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Stage;

    #[test]
    fn the_built_in_texts_use_only_prompt_placeholders() {
        for actor in Actor::ALL {
            let text = built_in(actor);
            assert_eq!(
                placeholder::first_unknown(text, placeholder::PROMPT),
                None,
                "{actor}"
            );
            for needed in [
                "{plan_dir}",
                "{branch}",
                "{base_branch}",
                "{instructions}",
                "{contract_file}",
            ] {
                assert!(text.contains(needed), "{actor} lacks {needed}");
            }
        }
        assert!(built_in(Stage::Deploying.actor()).contains("{deploy}"));
        for actor in [Stage::Implementing.actor(), Stage::Reviewing.actor()] {
            assert!(built_in(actor).contains("{checklist}"), "{actor}");
        }
    }
}
