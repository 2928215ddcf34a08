//! Rendering of slowlab results for people and programs: terminal tables,
//! JSON, CSV and Markdown exports, SVG plots, and writing files so that no
//! partial file is ever left looking complete.
//!
//! Every function takes a result from the `model` crate and returns text or
//! bytes; only `write_atomically` touches the filesystem. Nothing here
//! measures or analyzes.

pub mod cpu_views;
pub mod critical_path;
pub mod diff;
pub mod diff_page;
pub mod doctor;
pub mod export;
pub mod format;
pub mod fxprof;
pub mod html;
pub mod interactive;
pub mod lab;
pub mod path_diff;
pub mod plot;
pub mod sweep;
pub mod table;
pub mod trace_views;
pub mod write;

pub use write::{check_writable, write_atomically, ReportError};
