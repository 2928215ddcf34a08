//! The Parquet export of a build without the `parquet` feature (Arrow and
//! Parquet are a third of the build from scratch): the same interface as
//! `parquet.rs`, failing with [`ExportError::NoParquet`] before any trace
//! is read, so that a command says at once how to get it.

use std::path::Path;

use slowlab_analyze::analysis::Analysis;
use slowlab_model::findings::Finding;

use crate::{ExportError, ParquetOptions};

/// A run that cannot be exported: [`ParquetRun::new`] fails.
pub struct ParquetRun {
    never: std::convert::Infallible,
}

impl ParquetRun {
    pub fn new(_opts: &ParquetOptions) -> Result<ParquetRun, ExportError> {
        Err(ExportError::NoParquet)
    }

    pub fn add(&mut self, _name: &str, _analysis: &Analysis) -> Result<(), ExportError> {
        match self.never {}
    }

    pub fn add_with_findings(
        &mut self,
        _name: &str,
        _analysis: &Analysis,
        _findings: &[Finding],
    ) -> Result<(), ExportError> {
        match self.never {}
    }

    pub fn write(self, _dir: &Path) -> Result<String, ExportError> {
        match self.never {}
    }
}

/// Fails: this build has no Parquet.
pub fn export_parquet(
    _analyses: &[(&str, &Analysis)],
    _dir: &Path,
    _opts: &ParquetOptions,
) -> Result<String, ExportError> {
    Err(ExportError::NoParquet)
}
