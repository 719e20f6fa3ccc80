//! A sprint row with its rolled-up spend, as `sprint status` reads them (what it prints is
//! `report::status_json`'s).

use super::rows::SprintRaw;
use super::{Spend, Sprint, StoreError};

/// A sprint row with its rolled-up spend.
#[derive(sqlx::FromRow)]
pub(super) struct SprintSpendRaw {
    #[sqlx(flatten)]
    sprint: SprintRaw,
    #[sqlx(flatten)]
    spend: Spend,
}

impl SprintSpendRaw {
    pub(super) fn parse(self) -> Result<(Sprint, Spend), StoreError> {
        Ok((Sprint::try_from(self.sprint)?, self.spend))
    }
}
