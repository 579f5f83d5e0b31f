//! The control-plane shapes the UI reads, and (in the browser) the token it signs in with
//! and the authenticated HTTP calls it makes.

use leptos::prelude::*;

pub use wire::control::{ListeningPort, Me, NewLink, Session, SessionList, ShareLink, ShareLinks};

/// Sign-in state shared by every page: the token (kept in sessionStorage only) and who it is.
#[derive(Clone, Copy)]
pub struct Auth {
    pub token: RwSignal<Option<String>>,
    pub me: RwSignal<Option<Me>>,
    /// Why the last token was refused, shown above the sign-in form.
    pub refused: RwSignal<Option<String>>,
}

impl Auth {
    pub fn new() -> Auth {
        Auth {
            token: RwSignal::new(None),
            me: RwSignal::new(None),
            refused: RwSignal::new(None),
        }
    }
}

impl Default for Auth {
    fn default() -> Self {
        Auth::new()
    }
}

#[cfg(feature = "hydrate")]
pub use browser::*;

#[cfg(feature = "hydrate")]
mod browser {
    use gloo_net::http::{Request, RequestBuilder};
    use serde::de::DeserializeOwned;
    use wasm_bindgen::JsValue;

    use super::{Auth, Me};
    use leptos::prelude::*;

    const STORAGE_KEY: &str = "ptyhost.token";

    fn storage() -> Option<web_sys::Storage> {
        web_sys::window()?.session_storage().ok()?
    }

    /// Takes a token from the `#token=…` fragment (then removes it from the address bar),
    /// or from sessionStorage; never from the query.
    pub fn load_token() -> Option<String> {
        let window = web_sys::window()?;
        let location = window.location();
        let hash = location.hash().unwrap_or_default();
        if let Some(token) = hash.strip_prefix("#token=").filter(|t| !t.is_empty()) {
            let token = js_sys::decode_uri_component(token)
                .ok()
                .and_then(|t| t.as_string())
                .unwrap_or_else(|| token.to_owned());
            store_token(Some(&token));
            let clean = format!(
                "{}{}",
                location.pathname().unwrap_or_default(),
                location.search().unwrap_or_default()
            );
            if let Ok(history) = window.history() {
                let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&clean));
            }
            return Some(token);
        }
        storage()?.get_item(STORAGE_KEY).ok()?
    }

    pub fn store_token(token: Option<&str>) {
        if let Some(s) = storage() {
            let _ = match token {
                Some(t) => s.set_item(STORAGE_KEY, t),
                None => s.remove_item(STORAGE_KEY),
            };
        }
    }

    /// A failed call: the HTTP status (0 when the server was not reached) and its message.
    #[derive(Debug, Clone)]
    pub struct Failure {
        pub status: u16,
        pub message: String,
    }

    async fn send<T: DeserializeOwned>(
        req: RequestBuilder,
        token: &str,
        body: Option<&impl serde::Serialize>,
    ) -> Result<Option<T>, Failure> {
        let req = req.header("Authorization", &format!("Bearer {token}"));
        let sent = match body {
            Some(b) => {
                req.json(b)
                    .map_err(|e| Failure {
                        status: 0,
                        message: e.to_string(),
                    })?
                    .send()
                    .await
            }
            None => req.send().await,
        };
        let resp = sent.map_err(|e| Failure {
            status: 0,
            message: format!("the server is unreachable: {e}"),
        })?;
        let status = resp.status();
        if !(200..300).contains(&status) {
            let message = resp
                .json::<wire::control::ErrorBody>()
                .await
                .map(|b| b.error.message)
                .unwrap_or_else(|_| format!("HTTP {status}"));
            return Err(Failure { status, message });
        }
        if status == 204 {
            return Ok(None);
        }
        resp.json::<T>().await.map(Some).map_err(|e| Failure {
            status,
            message: e.to_string(),
        })
    }

    pub async fn get<T: DeserializeOwned>(path: &str, token: &str) -> Result<T, Failure> {
        send(Request::get(path), token, None::<&()>)
            .await?
            .ok_or_else(|| Failure {
                status: 204,
                message: "no content".into(),
            })
    }

    /// An A2A 1.0 HTTP+JSON read (it needs `A2A-Version`).
    pub async fn get_a2a<T: DeserializeOwned>(path: &str, token: &str) -> Result<T, Failure> {
        send(
            Request::get(path).header("A2A-Version", "1.0"),
            token,
            None::<&()>,
        )
        .await?
        .ok_or_else(|| Failure {
            status: 204,
            message: "no content".into(),
        })
    }

    /// Runs `start` once, when `host` is in the page and a token is signed in: what a page
    /// with a terminal does to bring up its browser side.
    pub fn start_once(
        host: NodeRef<leptos::html::Div>,
        auth: Auth,
        start: impl Fn(web_sys::HtmlElement, String) + 'static,
    ) {
        let started = StoredValue::new(false);
        Effect::new(move |_| {
            let (Some(el), Some(token)) = (host.get(), auth.token.get()) else {
                return;
            };
            if !started.get_value() {
                started.set_value(true);
                start(el.into(), token);
            }
        });
    }

    /// Runs `load` now and then every `period_ms` while the calling component lives and
    /// its sign-in stays the same.
    pub fn poll(auth: Auth, period_ms: u32, load: impl Fn() + Copy + 'static) {
        let alive = RwSignal::new(true);
        on_cleanup(move || alive.set(false));
        Effect::new(move |_| {
            let Some(token) = auth.token.get() else {
                return;
            };
            leptos::task::spawn_local(async move {
                while alive.try_get_untracked().unwrap_or(false)
                    && auth.token.get_untracked().as_deref() == Some(token.as_str())
                {
                    load();
                    gloo_timers::future::TimeoutFuture::new(period_ms).await;
                }
            });
        });
    }

    /// Calls the API with the signed-in token (nothing when signed out) and hands the
    /// answer to `done`, or the refusal, as the page should show it, to `error`.
    pub fn act<T, F>(
        auth: Auth,
        error: RwSignal<Option<String>>,
        call: impl FnOnce(String) -> F + 'static,
        done: impl FnOnce(T) + 'static,
    ) where
        F: std::future::Future<Output = Result<T, Failure>> + 'static,
    {
        let Some(token) = auth.token.get_untracked() else {
            return;
        };
        leptos::task::spawn_local(async move {
            match call(token).await {
                Ok(answer) => done(answer),
                Err(f) => {
                    error.try_set(Some(auth.check(f)));
                }
            }
        });
    }

    pub async fn post<T: DeserializeOwned>(
        path: &str,
        token: &str,
        body: &impl serde::Serialize,
    ) -> Result<T, Failure> {
        send(Request::post(path), token, Some(body))
            .await?
            .ok_or_else(|| Failure {
                status: 204,
                message: "no content".into(),
            })
    }

    pub async fn delete(path: &str, token: &str) -> Result<(), Failure> {
        send::<serde_json::Value>(Request::delete(path), token, None::<&()>)
            .await
            .map(|_| ())
    }

    impl Auth {
        /// Reads the token once the page is live and checks it against the server.
        pub fn start(self) {
            if let Some(token) = load_token() {
                self.sign_in(token);
            }
        }

        pub fn sign_in(self, token: String) {
            leptos::task::spawn_local(async move {
                match get::<Me>("/me", &token).await {
                    Ok(me) => {
                        store_token(Some(&token));
                        self.refused.set(None);
                        self.me.set(Some(me));
                        self.token.set(Some(token));
                    }
                    Err(f) if f.status == 401 => {
                        self.sign_out(Some(
                            "This token is unknown, expired or revoked. Ask for a new link.".into(),
                        ));
                    }
                    Err(f) => self.refused.set(Some(f.message)),
                }
            });
        }

        pub fn sign_out(self, why: Option<String>) {
            store_token(None);
            self.token.set(None);
            self.me.set(None);
            self.refused.set(why);
        }

        /// Handles a failed call: a 401 signs out with the reason; other failures are returned.
        pub fn check(self, f: Failure) -> String {
            if f.status == 401 {
                self.sign_out(Some(
                    "This token is no longer valid (expired or revoked).".into(),
                ));
            }
            f.message
        }
    }
}
