//! The terminal page's Files panel: the session's working directory, listed; a click opens
//! a directory or downloads a file. Files dropped on the terminal by the controller upload
//! into the directory shown, each with a progress bar.

use leptos::prelude::*;
use wire::control::{FileEntry, FileKind};

use crate::api::Auth;

/// An upload in flight or just ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Upload {
    pub name: String,
    pub loaded: f64,
    pub total: f64,
    /// `None` while it runs; then `Ok` or why it failed.
    pub outcome: Option<Result<(), String>>,
}

/// The panel's state, shared with the terminal (where files are dropped).
#[derive(Clone, Copy)]
pub struct Files {
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    auth: Auth,
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    sid: Signal<String>,
    /// The directory shown, relative to the working directory ("" is the directory itself).
    pub dir: RwSignal<String>,
    pub entries: RwSignal<Vec<FileEntry>>,
    pub uploads: RwSignal<Vec<Upload>>,
    pub error: RwSignal<Option<String>>,
}

impl Files {
    pub fn new(auth: Auth, sid: Signal<String>) -> Files {
        Files {
            auth,
            sid,
            dir: RwSignal::new(String::new()),
            entries: RwSignal::new(Vec::new()),
            uploads: RwSignal::new(Vec::new()),
            error: RwSignal::new(None),
        }
    }

    /// `dir/name`, or `name` in the working directory itself.
    fn path_of(&self, name: &str) -> String {
        let dir = self.dir.get_untracked();
        if dir.is_empty() {
            name.to_owned()
        } else {
            format!("{dir}/{name}")
        }
    }

    fn open(self, entry: &FileEntry) {
        let path = self.path_of(&entry.name);
        match entry.kind {
            FileKind::Dir => {
                self.dir.set(path);
                self.refresh();
            }
            _ => self.download(path, entry.name.clone()),
        }
    }

    fn up(self) {
        self.dir.update(|d| {
            *d = d
                .rsplit_once('/')
                .map(|(parent, _)| parent.to_owned())
                .unwrap_or_default();
        });
        self.refresh();
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::*;
    use wire::control::FileList;

    use super::{Files, Upload};
    use leptos::prelude::*;

    /// `/sessions/{sid}/files/{path}`, each segment percent-encoded.
    fn url(sid: &str, path: &str) -> String {
        let mut url = format!("/sessions/{}/files", js_sys::encode_uri_component(sid));
        for segment in path.split('/').filter(|s| !s.is_empty()) {
            url.push('/');
            url.push_str(&String::from(js_sys::encode_uri_component(segment)));
        }
        url
    }

    impl Files {
        pub fn refresh(self) {
            let Some(token) = self.auth.token.get_untracked() else {
                return;
            };
            let url = url(&self.sid.get_untracked(), &self.dir.get_untracked());
            leptos::task::spawn_local(async move {
                match crate::api::get::<FileList>(&url, &token).await {
                    Ok(list) => {
                        self.entries.try_set(list.entries);
                        self.error.try_set(None);
                    }
                    Err(f) => {
                        self.error.try_set(Some(self.auth.check(f)));
                    }
                }
            });
        }

        /// Fetches a file with the token and hands it to the browser as a download.
        pub(super) fn download(self, path: String, name: String) {
            let Some(token) = self.auth.token.get_untracked() else {
                return;
            };
            let url = url(&self.sid.get_untracked(), &path);
            leptos::task::spawn_local(async move {
                let fetched = gloo_net::http::Request::get(&url)
                    .header("Authorization", &format!("Bearer {token}"))
                    .send()
                    .await;
                let bytes = match fetched {
                    Ok(r) if r.ok() => r.binary().await.map_err(|e| e.to_string()),
                    Ok(r) => Err(format!("HTTP {}", r.status())),
                    Err(e) => Err(e.to_string()),
                };
                match bytes
                    .map_err(|e| format!("{name}: {e}"))
                    .and_then(|b| save(&b, &name))
                {
                    Ok(()) => self.error.try_set(None),
                    Err(e) => self.error.try_set(Some(e)),
                };
            });
        }

        /// Uploads the files of a drop into the directory shown.
        pub fn upload_dropped(self, ev: &web_sys::DragEvent) {
            let Some(list) = ev.data_transfer().and_then(|d| d.files()) else {
                return;
            };
            for i in 0..list.length() {
                if let Some(file) = list.get(i) {
                    self.upload(file);
                }
            }
        }

        fn upload(self, file: web_sys::File) {
            let Some(token) = self.auth.token.get_untracked() else {
                return;
            };
            let name = file.name();
            let url = url(&self.sid.get_untracked(), &self.path_of(&name));
            let index = self.uploads.with_untracked(Vec::len);
            self.uploads.update(|u| {
                u.push(Upload {
                    name: name.clone(),
                    loaded: 0.0,
                    total: file.size(),
                    outcome: None,
                })
            });
            let set = move |f: &dyn Fn(&mut Upload)| {
                self.uploads.try_update(|u| {
                    if let Some(up) = u.get_mut(index) {
                        f(up);
                    }
                });
            };
            let started = (|| {
                let xhr = web_sys::XmlHttpRequest::new()?;
                xhr.open_with_async("PUT", &url, true)?;
                xhr.set_request_header("Authorization", &format!("Bearer {token}"))?;
                let progress = Closure::<dyn FnMut(web_sys::ProgressEvent)>::new(
                    move |e: web_sys::ProgressEvent| set(&|u| u.loaded = e.loaded()),
                );
                let upload = xhr.upload()?;
                upload.set_onprogress(Some(progress.as_ref().unchecked_ref()));
                let done_xhr = xhr.clone();
                let done = Closure::once_into_js(move || {
                    drop(progress);
                    let status = done_xhr.status().unwrap_or(0);
                    let outcome = match status {
                        200..=299 => Ok(()),
                        0 => Err("the server is unreachable".to_owned()),
                        _ => Err(done_xhr
                            .response_text()
                            .ok()
                            .flatten()
                            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                            .unwrap_or_else(|| format!("HTTP {status}"))),
                    };
                    set(&|u| {
                        u.outcome = Some(outcome.clone());
                        if outcome.is_ok() {
                            u.loaded = u.total;
                        }
                    });
                    self.refresh();
                });
                xhr.set_onloadend(Some(done.unchecked_ref()));
                xhr.send_with_opt_blob(Some(&file))
            })();
            if let Err(e) = started {
                let why = e
                    .as_string()
                    .unwrap_or_else(|| "the upload could not start".into());
                set(&|u| u.outcome = Some(Err(why.clone())));
            }
        }
    }

    /// Offers `bytes` to the user as a download named `name`.
    fn save(bytes: &[u8], name: &str) -> Result<(), String> {
        let fail = |e: JsValue| format!("{name}: {e:?}");
        let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
        let blob = web_sys::Blob::new_with_u8_array_sequence(&parts).map_err(fail)?;
        let href = web_sys::Url::create_object_url_with_blob(&blob).map_err(fail)?;
        let document = web_sys::window()
            .and_then(|w| w.document())
            .ok_or("no document")?;
        let a: web_sys::HtmlAnchorElement =
            document.create_element("a").map_err(fail)?.unchecked_into();
        a.set_href(&href);
        a.set_download(name);
        a.click();
        let _ = web_sys::Url::revoke_object_url(&href);
        Ok(())
    }
}

#[cfg(not(feature = "hydrate"))]
impl Files {
    pub fn refresh(self) {}
    fn download(self, _path: String, _name: String) {}
}

/// The panel: where it is, what is there, what is uploading.
#[component]
pub fn FilesPanel(files: Files, can_upload: Signal<bool>) -> impl IntoView {
    // The working directory follows the shell's `cd` and its commands: keep up with them.
    #[cfg(feature = "hydrate")]
    crate::api::poll(files.auth, 5000, move || files.refresh());
    let shown = move || {
        let dir = files.dir.get();
        if dir.is_empty() {
            "./".to_owned()
        } else {
            format!("./{dir}/")
        }
    };
    view! {
        <section class="files" aria-labelledby="files-title">
            <h2 id="files-title">"Files"</h2>
            <div class="files-bar">
                <code class="files-dir">{shown}</code>
                <Show when=move || !files.dir.get().is_empty()>
                    <button class="small" on:click=move |_| files.up()>"Up"</button>
                </Show>
                <button class="small" on:click=move |_| files.refresh()>"Refresh"</button>
            </div>
            <Show when=move || can_upload.get()>
                <p class="muted">"Drop files on the terminal to upload them here."</p>
            </Show>
            <ul class="uploads" aria-label="Uploads">
                {move || files.uploads.get().into_iter().map(|u| {
                    let state = match &u.outcome {
                        None => "uploading".to_owned(),
                        Some(Ok(())) => "uploaded".to_owned(),
                        Some(Err(e)) => format!("failed: {e}"),
                    };
                    view! {
                        <li data-state=if u.outcome.is_none() { "running" } else if matches!(u.outcome, Some(Ok(()))) { "done" } else { "failed" }>
                            <span>{u.name.clone()}</span>
                            <progress max=u.total.max(1.0) value=u.loaded></progress>
                            <span class="muted">{state}</span>
                        </li>
                    }
                }).collect_view()}
            </ul>
            {move || files.error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <ul class="file-list" aria-label="Working directory">
                <For each=move || files.entries.get() key=|e| (e.name.clone(), e.kind, e.size, e.mtime.clone()) let:entry>
                    {
                        let dir = entry.kind == FileKind::Dir;
                        let label = if dir { format!("{}/", entry.name) } else { entry.name.clone() };
                        let size = if dir { String::new() } else { human(entry.size) };
                        view! {
                            <li data-kind=if dir { "dir" } else { "file" }>
                                <button class="link" on:click=move |_| files.open(&entry)>{label}</button>
                                <span class="muted">{size}</span>
                            </li>
                        }
                    }
                </For>
            </ul>
        </section>
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
