//! Files in a session's working directory, by the files API's rules (`crate::files`): paths
//! resolve beneath it, writes land whole or not at all, the size limit holds, observers read
//! only where `--observer-downloads` lets them, and every transfer is audited.

use crate::audit::Detail;
use base64::Engine as _;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use super::{Terminal, ToolError};
use crate::audit::{Event, Record};
use crate::auth::{Principal, Scope};
use crate::files::{self, Found, RelPath, Root};

/// A `file_read` returns this much of a file by default, and at most `MAX_READ`.
const DEFAULT_READ: u64 = 256 * 1024;
const MAX_READ: u64 = 4 * 1024 * 1024;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadParams {
    pub session_id: String,
    /// Relative to the session's working directory.
    pub path: String,
    /// The first byte to read (default 0).
    pub offset: Option<u64>,
    /// Bytes to read at most (default 262144, at most 4194304).
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileContent {
    pub path: String,
    /// The file's whole size.
    pub size: u64,
    pub offset: u64,
    /// `utf8`, or `base64` for bytes that are not UTF-8.
    pub encoding: &'static str,
    pub content: String,
    /// The file goes on after what `content` holds.
    pub truncated: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteParams {
    pub session_id: String,
    /// Relative to the session's working directory; missing parent directories are made.
    pub path: String,
    pub content: String,
    /// `utf8` (default) or `base64`.
    pub encoding: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileWritten {
    pub path: String,
    pub bytes: u64,
    /// A file of that name was there before.
    pub replaced: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListParams {
    pub session_id: String,
    /// A directory relative to the working directory (default: the directory itself).
    pub path: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Listing {
    pub entries: Vec<Entry>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Entry {
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: String,
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// RFC 3339.
    pub mtime: String,
}

#[tool_router(router = file_tools, vis = "pub(super)")]
impl Terminal {
    /// Reads a file in a session's working directory.
    #[tool(annotations(read_only_hint = true))]
    async fn file_read(
        &self,
        Parameters(p): Parameters<ReadParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<FileContent>, ToolError> {
        let who = self.who(&ctx)?;
        let path = RelPath::parse(&p.path)?;
        let root = self
            .root(&who, &p.session_id, self.read_scope(), "reading a file")
            .await?;
        let shown = path.display();
        let mut file = match files::read(&root, &path).await? {
            Found::File(f) => f,
            Found::Dir(_) => return Err(files::FileError::is_directory(&shown).into()),
        };
        let offset = p.offset.unwrap_or(0).min(file.len);
        let want = p.max_bytes.unwrap_or(DEFAULT_READ).min(MAX_READ);
        let mut bytes = Vec::new();
        let io = |e| ToolError::from(files::FileError::io(e, &shown));
        tokio::io::AsyncSeekExt::seek(&mut file.file, std::io::SeekFrom::Start(offset))
            .await
            .map_err(io)?;
        (&mut file.file)
            .take(want)
            .read_to_end(&mut bytes)
            .await
            .map_err(io)?;
        self.record(
            Event::FileRead,
            &p.session_id,
            &who,
            Detail::file(&shown, bytes.len() as u64, "mcp"),
        );
        let truncated = offset + (bytes.len() as u64) < file.len;
        let (encoding, content) = match String::from_utf8(bytes) {
            Ok(text) => ("utf8", text),
            Err(e) => (
                "base64",
                base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
            ),
        };
        Ok(Json(FileContent {
            path: shown,
            size: file.len,
            offset,
            encoding,
            content,
            truncated,
        }))
    }

    /// Writes a file in a session's working directory (whole: a reader never sees half of it).
    #[tool(annotations(read_only_hint = false, destructive_hint = true))]
    async fn file_write(
        &self,
        Parameters(p): Parameters<WriteParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<FileWritten>, ToolError> {
        let who = self.allowed(&ctx, Scope::Control, "writing a file")?;
        let path = RelPath::parse(&p.path)?;
        let bytes = match p.encoding.as_deref().unwrap_or("utf8") {
            "utf8" => p.content.into_bytes(),
            "base64" => (base64::engine::general_purpose::STANDARD.decode(&p.content))
                .map_err(|e| ToolError::invalid(format!("content is not base64: {e}")))?,
            other => {
                return Err(ToolError::invalid(format!(
                    "encoding {other:?} is neither utf8 nor base64"
                )));
            }
        };
        let root = self
            .root(&who, &p.session_id, Scope::Control, "writing a file")
            .await?;
        let limit = self.terminals.files.max_file_bytes;
        let body = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(
            bytes::Bytes::from(bytes),
        )]);
        let written = files::write(&root, &path, body, limit).await?;
        let shown = path.display();
        self.record(
            Event::FileWritten,
            &p.session_id,
            &who,
            Detail::file(&shown, written.bytes, "mcp"),
        );
        Ok(Json(FileWritten {
            path: shown,
            bytes: written.bytes,
            replaced: written.replaced,
        }))
    }

    /// Lists a directory in a session's working directory.
    #[tool(annotations(read_only_hint = true))]
    async fn file_list(
        &self,
        Parameters(p): Parameters<ListParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Listing>, ToolError> {
        let who = self.who(&ctx)?;
        let path = RelPath::parse(p.path.as_deref().unwrap_or(""))?;
        let root = self
            .root(&who, &p.session_id, self.read_scope(), "listing files")
            .await?;
        let list = match files::read(&root, &path).await? {
            Found::Dir(list) => list,
            Found::File(_) => {
                return Err(ToolError::new(
                    "FAILED_PRECONDITION",
                    format!("{} is a file", path.display()),
                ));
            }
        };
        let entries = list
            .entries
            .into_iter()
            .map(|e| Entry {
                kind: serde_json::to_value(e.kind)
                    .ok()
                    .and_then(|k| k.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                name: e.name,
                size: e.size,
                mode: e.mode,
                mtime: e.mtime,
            })
            .collect();
        Ok(Json(Listing { entries }))
    }
}

impl Terminal {
    fn read_scope(&self) -> Scope {
        match self.terminals.files.observer_downloads {
            true => Scope::Observe,
            false => Scope::Control,
        }
    }

    async fn root(
        &self,
        who: &Principal,
        sid: &str,
        needed: Scope,
        what: &str,
    ) -> Result<Root, ToolError> {
        Ok(files::session_root(&self.terminals.sessions, who, sid, needed, what).await?)
    }

    fn record(&self, event: Event, sid: &str, who: &Principal, detail: Detail) {
        let record = Record::new(event, sid).by(&who.token_id).detail(detail);
        self.terminals.sessions.audit().record(record);
    }
}
