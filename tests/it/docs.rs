//! The docs stay whole: every relative link in README.md, ARCHITECTURE.md and `docs/`
//! reaches a file, and an anchor a heading of it; the README stays short, the book's
//! summary lists every page, and no page cites a spec the repository does not hold.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a newcomer is asked to read before the docs' map.
const README_MAX_LINES: usize = 200;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, ARCHITECTURE.md and every `.md` under `docs/`, its folders included, sorted.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    let mut docs = Vec::new();
    let mut folders = vec![root().join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("docs/ is readable") {
            let path = entry.expect("a docs/ entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                docs.push(path);
            }
        }
    }
    docs.sort();
    pages.extend(docs);
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn name(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A line that opens or closes a fenced code block: its fence's character and length.
fn fence(line: &str) -> Option<(char, usize)> {
    let trimmed = line.trim_start();
    let c = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = trimmed.chars().take_while(|x| *x == c).count();
    (n >= 3).then_some((c, n))
}

/// The page's prose: its paragraphs outside fenced code blocks, each with its first
/// line's number (1-based).
fn paragraphs(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut open: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some((c, n)) = fence(line) {
            match open {
                None => open = Some((c, n)),
                Some((oc, on)) if oc == c && n >= on => open = None,
                Some(_) => {}
            }
            out.extend(current.take());
            continue;
        }
        if open.is_some() || line.trim().is_empty() {
            out.extend(current.take());
            continue;
        }
        match &mut current {
            Some((_, para)) => {
                para.push('\n');
                para.push_str(line);
            }
            None => current = Some((i + 1, line.to_string())),
        }
    }
    out.extend(current);
    out
}

/// The text without its code spans (a run of backticks up to the next run of as many),
/// since a `[x](y)` in code is no link.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run = |at: usize| chars[at..].iter().take_while(|c| **c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = run(i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = run(j);
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// Every inline link's target in a piece of prose: what stands between `](` and `)`.
fn link_targets(prose: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = prose;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    targets
}

/// Every relative link of a page, with the line its paragraph starts on.
fn relative_links(text: &str) -> Vec<(usize, String)> {
    paragraphs(text)
        .into_iter()
        .flat_map(|(line, para)| {
            link_targets(&without_code_spans(&para))
                .into_iter()
                .map(move |target| (line, target))
        })
        .filter(|(_, target)| {
            !["http://", "https://", "mailto:"]
                .iter()
                .any(|scheme| target.starts_with(scheme))
        })
        .collect()
}

/// A heading's anchor as GitHub makes it: the text without its markdown, lowercase,
/// letters, digits, `-` and `_` kept, spaces made `-`, the rest dropped.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link in a heading shows its text only.
    while let Some(at) = rest.find("](") {
        text.push_str(&rest[..at]);
        rest = rest[at..].find(')').map_or("", |end| &rest[at + end + 1..]);
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings, a repeated one numbered `-1`, `-2`… as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut open: Option<(char, usize)> = None;
    for line in text.lines() {
        if let Some((c, n)) = fence(line) {
            match open {
                None => open = Some((c, n)),
                Some((oc, on)) if oc == c && n >= on => open = None,
                Some(_) => {}
            }
            continue;
        }
        if open.is_some() {
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        let Some(title) = line[hashes..].strip_prefix(' ') else {
            continue;
        };
        if !(1..=6).contains(&hashes) {
            continue;
        }
        let base = slug(title.trim().trim_end_matches('#').trim());
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// What is wrong with one link of `page`, if anything.
fn broken(page: &Path, target: &str) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().expect("a page's folder").join(path)
    };
    if !file.exists() {
        return Some(format!("no file {}", file.display()));
    }
    let anchor = anchor?;
    if file.extension().is_none_or(|ext| ext != "md") {
        return None;
    }
    let found = anchors(&read(&file));
    (!found.contains(anchor)).then(|| {
        format!(
            "no heading #{anchor} in {} (its anchors: {})",
            name(&file),
            found.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}

#[test]
fn every_relative_link_reaches_a_file_and_a_heading() {
    let mut problems = Vec::new();
    for page in pages() {
        for (line, target) in relative_links(&read(&page)) {
            if let Some(why) = broken(&page, &target) {
                problems.push(format!("{}:{line}: ({target}): {why}", name(&page)));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_readme_is_short_enough_to_read_first() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail into docs/"
    );
}

/// ARCHITECTURE.md is a map one reads whole: at most this many lines.
const ARCHITECTURE_MAX_LINES: usize = 150;

/// Every file the map names exists: a path (`src/git/mod.rs`, `tests/it/fsm/`) where it
/// says, a bare file name (`decide.rs`) somewhere under `src/`.
#[test]
fn the_architecture_map_is_short_and_names_only_files_that_exist() {
    let text = read(&root().join("ARCHITECTURE.md"));
    let lines = text.lines().count();
    assert!(
        lines <= ARCHITECTURE_MAX_LINES,
        "ARCHITECTURE.md has {lines} lines, more than {ARCHITECTURE_MAX_LINES}"
    );
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut walk = vec![root().join("src")];
    while let Some(dir) = walk.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk.push(path);
            } else {
                names.insert(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    let mut missing = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        let named = span.trim_end_matches('/');
        let is_path = named.contains('/') && !named.contains([' ', '{']) && !named.contains("NAME");
        if is_path && (named.starts_with("src/") || named.starts_with("tests/")) {
            if !root().join(named).exists() {
                missing.push(span.to_string());
            }
        } else if named.ends_with(".rs") && !named.contains(['/', ' ']) && !names.contains(named) {
            missing.push(span.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names files that do not exist: {missing:?}"
    );
}

#[test]
fn the_book_summary_lists_every_page() {
    let summary_path = root().join("docs/SUMMARY.md");
    let listed: BTreeSet<String> = relative_links(&read(&summary_path))
        .into_iter()
        .map(|(_, target)| target.split('#').next().unwrap_or("").to_string())
        .collect();
    let docs = root().join("docs");
    let missing: Vec<String> = pages()
        .iter()
        .filter(|page| **page != summary_path)
        .filter_map(|page| page.strip_prefix(&docs).ok())
        .map(|page| page.to_string_lossy().into_owned())
        .filter(|page| !listed.contains(page))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/SUMMARY.md does not list: {}",
        missing.join(", ")
    );
}

#[test]
fn no_page_cites_the_spec_by_section() {
    let citing: Vec<String> = pages()
        .iter()
        .flat_map(|page| {
            read(page)
                .lines()
                .enumerate()
                .filter(|(_, line)| line.contains("SPEC.md §") || line.contains("SPEC §"))
                .map(|(i, _)| format!("{}:{}", name(page), i + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        citing.is_empty(),
        "say the behaviour, not the spec's section (the spec is not in the repository): {}",
        citing.join(", ")
    );
}

#[test]
fn the_link_reader_knows_code_from_links_and_slugs_as_github_does() {
    let text = "See [a](a.md#x) and `[b](b.md)`.\n\n```\n[c](c.md)\n```\n\n\
                ``[d](d.md) ` e`` then ![pic](p.png \"t\") and [web](https://x.org).";
    let targets: Vec<String> = relative_links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(targets, ["a.md#x", "p.png"]);
    assert_eq!(slug("`hanarang run`"), "hanarang-run");
    assert_eq!(slug("`--json` output"), "--json-output");
    assert_eq!(slug("The project's recipe"), "the-projects-recipe");
    assert_eq!(
        slug("Sessions: a retry continues"),
        "sessions-a-retry-continues"
    );
    assert_eq!(slug("계약 (3) 확인"), "계약-3-확인");
    let found = anchors("# A\n## A\n```\n# A\n```\n### A\n");
    assert_eq!(found.into_iter().collect::<Vec<_>>(), ["a", "a-1", "a-2"]);
}

/// The files outside `domain/` and `handoff/` whose code (not their comments or test
/// modules) may name a particular sister: the config keeps one table per sister. Everything
/// else asks a sister's row (`Actor::info`) or its stage, so a new sister touches the
/// table, its message type, its prompt and these.
const FILES_NAMING_A_SISTER: &[&str] = &["src/config/agent.rs"];

#[test]
fn code_asks_a_sisters_role_not_its_name() {
    let names = ["harang", "narang", "darang", "erang"];
    // A sister's name as a word (`Actor::Darang`, `"darang"`, `.darang`), or its message
    // types (`DarangMessage`, `DarangVerdict`).
    let names_a_sister = |line: &str| {
        let lower = line.to_lowercase();
        lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| {
                let typed = word.ends_with("message") || word.ends_with("verdict");
                names
                    .iter()
                    .any(|n| word == *n || (typed && word.starts_with(n)))
            })
    };
    let mut naming = BTreeSet::new();
    let mut walk = vec![root().join("src")];
    while let Some(dir) = walk.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let relative = path
                .strip_prefix(root())
                .unwrap_or(&path)
                .display()
                .to_string();
            if relative == "src/domain" || relative == "src/handoff" {
                continue;
            }
            if path.is_dir() {
                walk.push(path);
                continue;
            }
            if !relative.ends_with(".rs") || relative.ends_with("_tests.rs") {
                continue;
            }
            let text = read(&path);
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            if code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .any(names_a_sister)
            {
                naming.insert(relative);
            }
        }
    }
    let allowed: BTreeSet<String> = FILES_NAMING_A_SISTER
        .iter()
        .map(|f| f.to_string())
        .collect();
    let more: Vec<&String> = naming.difference(&allowed).collect();
    assert!(
        more.is_empty(),
        "these files name a sister where a role would do (ask `Actor::info`, `actor.stage()` or `Stage::X.actor()`): {more:?}"
    );
    assert!(FILES_NAMING_A_SISTER.len() <= 8);
}
