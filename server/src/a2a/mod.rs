//! A2A: the errors every binding maps into its own vocabulary, and the task service
//! that every binding calls (`service`).

pub mod push;
pub mod service;
pub mod v03;

use wire::rpc::{ErrorInfo, JsonRpcError, RpcStatus, StatusBody, V03StatusBody};

/// The A2A protocol version a caller speaks on a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    V1,
    V03,
}

impl Version {
    /// How the store and logs name the version.
    pub fn label(self) -> &'static str {
        match self {
            Version::V1 => "1.0",
            Version::V03 => "0.3",
        }
    }

    pub fn from_label(label: &str) -> Option<Version> {
        match label {
            "1.0" => Some(Version::V1),
            "0.3" => Some(Version::V03),
            _ => None,
        }
    }

    /// Whether an `A2A-Version` header value (empty when absent) fits: 1.x for 1.0 routes
    /// and methods, none or 0.x for 0.3 ones.
    pub fn accepts(self, header: &str) -> bool {
        match self {
            Version::V1 => header == "1" || header.starts_with("1."),
            Version::V03 => header.is_empty() || header.starts_with("0."),
        }
    }
}

/// How a request reached the task service: the protocol version it speaks and the
/// extensions it activated.
#[derive(Debug, Clone, Copy)]
pub struct Via<'a> {
    pub version: Version,
    pub extensions: &'a [&'static str],
}

/// An A2A error, independent of the binding that reports it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum A2aError {
    #[error("task {0} not found")]
    TaskNotFound(String),
    #[error("task {task} has no push notification config {config}")]
    PushConfigNotFound { task: String, config: String },
    #[error("task {0} is in a terminal state and cannot be canceled")]
    TaskNotCancelable(String),
    #[error("{0}")]
    UnsupportedOperation(String),
    #[error("{0}")]
    ContentTypeNotSupported(String),
    #[error("this agent has no extended card")]
    ExtendedCardNotConfigured,
    #[error("{0}")]
    VersionNotSupported(String),
    #[error("this agent requires the extension {0}: activate it with the A2A-Extensions header")]
    ExtensionSupportRequired(String),
    /// The request is not valid JSON or not the expected shape.
    #[error("{0}")]
    InvalidRequest(String),
    /// The request's body is over the binding's limit (in bytes).
    #[error("the request body is over its limit of {0} bytes")]
    RequestTooLarge(usize),
    /// The request is well-formed but a parameter is not acceptable.
    #[error("{0}")]
    InvalidParams(String),
    #[error("{0}")]
    MethodNotFound(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// An A202 object was refused; the A202 code travels in the ErrorInfo metadata.
    #[error("{0}")]
    A202(crate::a202::A202Refusal),
    /// A refusal an extension defines (idempotency/v1, hitl-prompt/v1), in its own codes.
    #[error("{}", .0.detail)]
    Extension(crate::agentic::ExtensionRefusal),
    #[error("this stream fell {0} events behind the task; subscribe again")]
    StreamLagged(u64),
    #[error("internal error")]
    Internal,
}

impl A2aError {
    /// The ErrorInfo reason (UPPER_SNAKE, no "Error" suffix).
    pub fn reason(&self) -> &'static str {
        match self {
            A2aError::TaskNotFound(_) | A2aError::PushConfigNotFound { .. } => "TASK_NOT_FOUND",
            A2aError::TaskNotCancelable(_) => "TASK_NOT_CANCELABLE",
            A2aError::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            A2aError::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            A2aError::ExtendedCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            A2aError::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
            A2aError::ExtensionSupportRequired(_) => "EXTENSION_SUPPORT_REQUIRED",
            A2aError::InvalidRequest(_) | A2aError::RequestTooLarge(_) => "INVALID_REQUEST",
            A2aError::InvalidParams(_) | A2aError::A202(_) => "INVALID_PARAMS",
            A2aError::MethodNotFound(_) => "METHOD_NOT_FOUND",
            A2aError::Unauthenticated(_) => "UNAUTHENTICATED",
            A2aError::PermissionDenied(_) => "PERMISSION_DENIED",
            A2aError::StreamLagged(_) => "STREAM_LAGGED",
            A2aError::Extension(r) => r.reason,
            A2aError::Internal => "INTERNAL",
        }
    }

    /// HTTP status and google.rpc code name (A2A v1.0.1 table).
    pub fn http(&self) -> (u16, &'static str) {
        match self {
            A2aError::TaskNotFound(_) | A2aError::PushConfigNotFound { .. } => (404, "NOT_FOUND"),
            A2aError::TaskNotCancelable(_)
            | A2aError::ExtendedCardNotConfigured
            | A2aError::UnsupportedOperation(_)
            | A2aError::VersionNotSupported(_)
            | A2aError::ExtensionSupportRequired(_) => (400, "FAILED_PRECONDITION"),
            A2aError::ContentTypeNotSupported(_)
            | A2aError::InvalidRequest(_)
            | A2aError::InvalidParams(_)
            | A2aError::A202(_) => (400, "INVALID_ARGUMENT"),
            A2aError::RequestTooLarge(_) => (413, "INVALID_ARGUMENT"),
            A2aError::MethodNotFound(_) => (404, "UNIMPLEMENTED"),
            A2aError::Unauthenticated(_) => (401, "UNAUTHENTICATED"),
            A2aError::PermissionDenied(_) => (403, "PERMISSION_DENIED"),
            A2aError::StreamLagged(_) | A2aError::Internal => (500, "INTERNAL"),
            A2aError::Extension(r) => (
                r.http,
                match r.http {
                    409 => "ABORTED",
                    400 | 422 => "INVALID_ARGUMENT",
                    _ => "INTERNAL",
                },
            ),
        }
    }

    /// The JSON-RPC error code.
    pub fn jsonrpc_code(&self) -> i64 {
        match self {
            A2aError::TaskNotFound(_) | A2aError::PushConfigNotFound { .. } => -32001,
            A2aError::TaskNotCancelable(_) => -32002,
            A2aError::ExtendedCardNotConfigured => -32007,
            A2aError::UnsupportedOperation(_) => -32004,
            A2aError::ContentTypeNotSupported(_) => -32005,
            A2aError::ExtensionSupportRequired(_) => -32008,
            A2aError::VersionNotSupported(_) => -32009,
            A2aError::InvalidRequest(_) | A2aError::RequestTooLarge(_) => -32600,
            A2aError::MethodNotFound(_) => -32601,
            A2aError::InvalidParams(_) | A2aError::A202(_) => -32602,
            // Implementation-defined server errors: A2A assigns these no code.
            A2aError::Unauthenticated(_) | A2aError::PermissionDenied(_) => -32000,
            A2aError::StreamLagged(_) | A2aError::Internal => -32603,
            A2aError::Extension(r) => r.jsonrpc,
        }
    }

    /// The google.rpc.ErrorInfo detail.
    pub fn error_info(&self) -> ErrorInfo {
        let info = ErrorInfo::a2a(self.reason());
        match self {
            A2aError::A202(refusal) => {
                let code = refusal.code().unwrap_or("kernel_validation");
                let info = info.with([
                    ("extension", crate::a202::URI.to_owned()),
                    ("a202_code", code.to_owned()),
                ]);
                match refusal {
                    crate::a202::A202Refusal::SequenceConflict { current, .. } => {
                        info.with([("current_sequence", current.to_string())])
                    }
                    _ => info,
                }
            }
            A2aError::ExtensionSupportRequired(uri) => info.with([
                ("extension", uri.clone()),
                ("code", "EXTENSION_REQUIRED".to_owned()),
            ]),
            _ => info,
        }
    }

    /// The JSON-RPC error object: A2A errors carry their ErrorInfo in `data`; an
    /// extension's error, the message and `data` its spec gives.
    pub fn jsonrpc_error(&self) -> JsonRpcError {
        let (message, data) = match self {
            A2aError::Extension(r) => (r.jsonrpc_message.to_owned(), r.data.clone()),
            _ => (self.to_string(), wire::to_json([self.error_info()])),
        };
        JsonRpcError {
            code: self.jsonrpc_code(),
            message,
            data: Some(data),
        }
    }

    /// The name 0.3 clients give this error's class (a2a-sdk's exception names), when A2A
    /// has one for it.
    fn v03_type(&self) -> Option<&'static str> {
        Some(match self {
            A2aError::TaskNotFound(_) | A2aError::PushConfigNotFound { .. } => "TaskNotFoundError",
            A2aError::TaskNotCancelable(_) => "TaskNotCancelableError",
            A2aError::UnsupportedOperation(_) => "UnsupportedOperationError",
            A2aError::ContentTypeNotSupported(_) => "ContentTypeNotSupportedError",
            A2aError::ExtendedCardNotConfigured => "ExtendedAgentCardNotConfiguredError",
            A2aError::ExtensionSupportRequired(_) => "ExtensionSupportRequiredError",
            A2aError::VersionNotSupported(_) => "VersionNotSupportedError",
            A2aError::InvalidRequest(_) | A2aError::RequestTooLarge(_) => "InvalidRequestError",
            A2aError::InvalidParams(_) | A2aError::A202(_) => "InvalidParamsError",
            A2aError::MethodNotFound(_) => "MethodNotFoundError",
            A2aError::StreamLagged(_) | A2aError::Internal => "InternalError",
            A2aError::Unauthenticated(_)
            | A2aError::PermissionDenied(_)
            | A2aError::Extension(_) => return None,
        })
    }

    /// The 0.3 REST body: the 1.0 body plus the JSON-RPC code, message and error class.
    pub fn v03_rest_body(&self) -> V03StatusBody {
        V03StatusBody {
            body: self.status_body(),
            code: self.jsonrpc_code(),
            message: self.to_string(),
            class: self.v03_type().map(str::to_owned),
        }
    }

    /// The REST body: google.rpc.Status.
    pub fn status_body(&self) -> StatusBody {
        let (http, status) = self.http();
        StatusBody {
            error: RpcStatus {
                code: http,
                status: status.to_owned(),
                message: self.to_string(),
                details: vec![self.error_info()],
                data: match self {
                    A2aError::Extension(r) => Some(r.data.clone()),
                    _ => None,
                },
            },
        }
    }
}

impl From<crate::extensions::Required> for A2aError {
    fn from(missing: crate::extensions::Required) -> A2aError {
        A2aError::ExtensionSupportRequired(missing.0)
    }
}

impl From<crate::executor::ExecutorRefusal> for A2aError {
    fn from(refused: crate::executor::ExecutorRefusal) -> A2aError {
        use crate::executor::ExecutorRefusal;
        match refused {
            ExecutorRefusal::InvalidParams(m) => A2aError::InvalidParams(m),
            ExecutorRefusal::PermissionDenied(m) => A2aError::PermissionDenied(m),
            ExecutorRefusal::Unsupported(m) => A2aError::UnsupportedOperation(m),
            ExecutorRefusal::Failed(e) => A2aError::from(e),
        }
    }
}

impl From<crate::agentic::ExtensionRefusal> for A2aError {
    fn from(r: crate::agentic::ExtensionRefusal) -> A2aError {
        A2aError::Extension(r)
    }
}

impl From<crate::a202::A202Refusal> for A2aError {
    fn from(r: crate::a202::A202Refusal) -> A2aError {
        A2aError::A202(r)
    }
}

impl From<crate::a202::Error> for A2aError {
    fn from(e: crate::a202::Error) -> A2aError {
        match e {
            crate::a202::Error::Refused(r) => A2aError::A202(r),
            crate::a202::Error::Store(e) => A2aError::from(e),
        }
    }
}

impl From<anyhow::Error> for A2aError {
    fn from(e: anyhow::Error) -> A2aError {
        tracing::error!(error = %format!("{e:#}"), "A2A request failed");
        A2aError::Internal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_required_extension_left_out_is_extension_support_required_in_every_vocabulary() {
        let err = A2aError::from(crate::extensions::Required("urn:x".into()));
        assert_eq!(err.reason(), "EXTENSION_SUPPORT_REQUIRED");
        assert_eq!(err.jsonrpc_code(), -32008);
        assert_eq!(err.http().0, 400);
    }
}
