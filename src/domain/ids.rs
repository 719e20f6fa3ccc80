//! Sprint and run ids, as the database writes them and as people type them (the CLI and
//! Discord parse them alike).

/// `SPRINT-001`, ..., `SPRINT-999`, `SPRINT-1000`.
pub fn sprint_id(number: i64) -> String {
    format!("SPRINT-{number:03}")
}

/// A sprint id as people type it: `SPRINT-001`, `sprint-001`, `1` and `001` all name
/// SPRINT-001 (the CLI and Discord alike).
pub fn parse_sprint_id(input: &str) -> String {
    let input = input.trim();
    let upper = input.to_uppercase();
    let digits = upper.strip_prefix("SPRINT-").unwrap_or(&upper);
    match digits.parse::<i64>() {
        Ok(n) if n > 0 => sprint_id(n),
        _ => upper,
    }
}

/// A run's id: its sprint's id and its number, `SPRINT-001-R03`.
pub fn run_id(sprint_id: &str, number: i64) -> String {
    format!("{sprint_id}-R{number:02}")
}

/// A run as a person names it: its id (`SPRINT-001-R02`), or its number within the sprint
/// (`R02`, `r2`, `2`).
pub fn parse_run_id(sprint_id: &str, input: &str) -> String {
    let input = input.trim();
    let number = input
        .strip_prefix(['R', 'r'])
        .unwrap_or(input)
        .parse::<i64>();
    match number {
        Ok(n) if n > 0 => run_id(sprint_id, n),
        _ => input.to_uppercase(),
    }
}

/// A commit id as people read it: its first seven characters.
pub fn short_commit(id: &str) -> &str {
    id.get(..7).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sprint_ids_are_taken_as_people_type_them() {
        for input in ["SPRINT-001", "sprint-001", "Sprint-1", "1", "001", " 1 "] {
            assert_eq!(parse_sprint_id(input), "SPRINT-001", "{input}");
        }
        assert_eq!(parse_sprint_id("SPRINT-1234"), "SPRINT-1234");
        assert_eq!(parse_sprint_id("1234"), "SPRINT-1234");
        assert_eq!(parse_sprint_id("nope"), "NOPE");
        assert_eq!(parse_sprint_id("0"), "0");
    }

    #[test]
    fn run_ids_are_taken_as_people_type_them() {
        for input in ["SPRINT-001-R02", "sprint-001-r02", "R02", "r2", "2", " 02 "] {
            assert_eq!(
                parse_run_id("SPRINT-001", input),
                "SPRINT-001-R02",
                "{input}"
            );
        }
        assert_eq!(run_id("SPRINT-001", 123), "SPRINT-001-R123");
    }
}
