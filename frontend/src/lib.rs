//! The WASM entry point: hydrates the server-rendered UI in the browser.
// The UI's view types are deep when built without cargo-leptos's type erasure (tests).
#![recursion_limit = "256"]
#![forbid(unsafe_code)]

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
