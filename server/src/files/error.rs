//! Why a file transfer was refused, in google.rpc.Status terms: an HTTP status, a
//! canonical code, an ErrorInfo reason and a message that names the path.

use std::io;

use wire::rpc::{ErrorInfo, RpcStatus, StatusBody};

#[derive(Debug, Clone, PartialEq)]
pub struct FileError {
    pub status: u16,
    /// The google.rpc code name.
    pub code: &'static str,
    /// The ErrorInfo reason.
    pub reason: &'static str,
    pub message: String,
}

impl FileError {
    pub fn new(status: u16, code: &'static str, reason: &'static str, message: String) -> Self {
        FileError {
            status,
            code,
            reason,
            message,
        }
    }

    pub fn invalid_path(path: &str, why: &str) -> Self {
        let m = format!("the path {path:?} is refused: {why}");
        FileError::new(400, "INVALID_ARGUMENT", "INVALID_PATH", m)
    }

    pub fn is_directory(path: &str) -> Self {
        let m = format!("{path:?} is a directory; name a file");
        FileError::new(400, "FAILED_PRECONDITION", "IS_A_DIRECTORY", m)
    }

    pub fn too_large(limit: u64) -> Self {
        let m = format!("the file is over the limit of {limit} bytes (--max-file-bytes)");
        FileError::new(413, "RESOURCE_EXHAUSTED", "FILE_TOO_LARGE", m)
    }

    pub fn body(why: &str) -> Self {
        let m = format!("the request body could not be read: {why}");
        FileError::new(400, "INVALID_ARGUMENT", "BODY_UNREADABLE", m)
    }

    pub fn not_found(message: String) -> Self {
        FileError::new(404, "NOT_FOUND", "NOT_FOUND", message)
    }

    pub fn permission_denied(message: String) -> Self {
        FileError::new(403, "PERMISSION_DENIED", "PERMISSION_DENIED", message)
    }

    pub fn range_not_satisfiable(len: u64) -> Self {
        let m = format!("the range is outside the file's {len} bytes");
        FileError::new(416, "OUT_OF_RANGE", "RANGE_NOT_SATISFIABLE", m)
    }

    /// A failure that is not the caller's (logged; the message says no more).
    pub fn internal(e: &anyhow::Error) -> Self {
        tracing::error!(error = %format!("{e:#}"), "file request failed");
        FileError::new(500, "INTERNAL", "INTERNAL", "internal error".into())
    }

    /// A filesystem error on `path`.
    pub fn io(e: io::Error, path: &str) -> Self {
        use io::ErrorKind::*;
        match e.kind() {
            NotFound => FileError::not_found(format!("no file or directory {path:?}")),
            // cap-std says PermissionDenied for a path that would leave the root.
            PermissionDenied => FileError::permission_denied(format!(
                "{path:?} is outside the session's working directory or not permitted ({e})"
            )),
            IsADirectory | DirectoryNotEmpty => FileError::is_directory(path),
            NotADirectory => FileError::new(
                400,
                "FAILED_PRECONDITION",
                "NOT_A_DIRECTORY",
                format!("a parent of {path:?} is not a directory"),
            ),
            StorageFull | QuotaExceeded | FileTooLarge => FileError::new(
                507,
                "RESOURCE_EXHAUSTED",
                "DISK_FULL",
                format!("the disk is full: {path:?} could not be written ({e})"),
            ),
            _ => {
                tracing::error!(path, error = %e, "file operation failed");
                FileError::new(500, "INTERNAL", "INTERNAL", format!("{path:?}: {e}"))
            }
        }
    }

    /// The body: google.rpc.Status with an ErrorInfo detail.
    pub fn status_body(&self) -> StatusBody {
        StatusBody {
            error: RpcStatus {
                code: self.status,
                status: self.code.to_owned(),
                message: self.message.clone(),
                details: vec![ErrorInfo::new(self.reason, "ptyhost")],
                data: None,
            },
        }
    }
}
