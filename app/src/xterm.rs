//! xterm.js as the UI uses it: the bindings xterm-js-rs lacks, opening a terminal with its
//! addons, scaling a tile into its box, writing bytes and painting a keyframe.

use js_sys::Uint8Array;
use std::rc::Rc;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use xterm_js_rs::addons::fit::FitAddon;
use xterm_js_rs::addons::unicode11::Unicode11Addon;
use xterm_js_rs::addons::webgl::WebglAddon;
use xterm_js_rs::{Terminal, TerminalOptions};

#[wasm_bindgen]
extern "C" {
    /// The parts of xterm.js ≥ 5 that xterm-js-rs does not bind.
    pub type TerminalExt;
    #[wasm_bindgen(method, js_name = write)]
    pub fn write_bytes(this: &TerminalExt, data: &Uint8Array, done: &js_sys::Function);
    #[wasm_bindgen(method, catch, js_name = loadAddon)]
    pub fn try_load_addon(this: &TerminalExt, addon: &JsValue) -> Result<(), JsValue>;
    #[wasm_bindgen(method, getter)]
    pub fn unicode(this: &TerminalExt) -> UnicodeHandle;
    pub type UnicodeHandle;
    #[wasm_bindgen(method, setter, js_name = activeVersion)]
    pub fn set_active_version(this: &UnicodeHandle, v: &str);
    #[wasm_bindgen(method, getter)]
    pub fn options(this: &TerminalExt) -> TerminalOptions;
}

#[wasm_bindgen(module = "xterm-addon-search")]
extern "C" {
    /// xterm.js's search addon: finds text in the scrollback and selects it.
    pub type SearchAddon;
    #[wasm_bindgen(constructor)]
    pub fn new() -> SearchAddon;
    #[wasm_bindgen(method, js_name = findNext)]
    pub fn find_next(this: &SearchAddon, term: &str) -> bool;
    #[wasm_bindgen(method, js_name = findPrevious)]
    pub fn find_previous(this: &SearchAddon, term: &str) -> bool;
}

pub fn ext(t: &Terminal) -> &TerminalExt {
    t.unchecked_ref()
}

/// Opens xterm.js in `host`: the fit and Unicode 11 addons, WebGL unless the DOM renderer
/// was chosen (localStorage "ptyhost.renderer" = "dom"), no keyboard until it is wanted.
pub fn open_terminal(host: &web_sys::HtmlElement) -> (Rc<Terminal>, FitAddon) {
    open_terminal_with(host, 14, true)
}

/// `open_terminal` at `font_size`, and without WebGL when `webgl` is false (a page of many
/// small terminals: browsers give a page a handful of WebGL contexts).
pub fn open_terminal_with(
    host: &web_sys::HtmlElement,
    font_size: u32,
    webgl: bool,
) -> (Rc<Terminal>, FitAddon) {
    let options = TerminalOptions::new();
    options.set_cursor_blink(true);
    options.set_font_size(font_size);
    options.set_scrollback(5000);
    options.set_disable_stdin(true);
    // The Unicode 11 width tables (matching the server's emulator) are a "proposed" API.
    let _ = js_sys::Reflect::set(&options, &"allowProposedApi".into(), &true.into());
    let term = Rc::new(Terminal::new(&options));
    let fit = FitAddon::new();
    term.load_addon(fit.clone().into());
    let unicode = Unicode11Addon::new();
    term.load_addon(unicode.into());
    ext(&term).unicode().set_active_version("11");
    term.open(host.clone());
    // WebGL where the browser has it, unless the user chose the DOM renderer
    // (localStorage "ptyhost.renderer" = "dom"); the DOM renderer otherwise.
    let dom_chosen = web_sys::window()
        .and_then(|w| w.local_storage().ok().flatten())
        .and_then(|s| s.get_item("ptyhost.renderer").ok().flatten())
        .is_some_and(|r| r == "dom");
    if webgl
        && !dom_chosen
        && ext(&term)
            .try_load_addon(&WebglAddon::new(None).into())
            .is_err()
    {
        leptos::logging::log!("WebGL unavailable; using the DOM renderer");
    }
    (term, fit)
}

/// Drops any scaling of the terminal element in `host`; the element.
pub fn unscale(host: &web_sys::HtmlElement) -> Option<web_sys::HtmlElement> {
    let el = host.first_element_child()?;
    let el = el.dyn_into::<web_sys::HtmlElement>().ok()?;
    let _ = el.style().remove_property("transform");
    Some(el)
}

/// Scales the terminal in `host` down until it fits its width (a screen larger than the
/// pane it is watched in).
pub fn scale_into(host: &web_sys::HtmlElement) {
    let Some(el) = unscale(host) else {
        return;
    };
    let (have, need) = (host.client_width(), el.scroll_width());
    if need > have && have > 0 {
        let _ = el.style().set_property(
            "transform",
            &format!("scale({})", f64::from(have) / f64::from(need)),
        );
        let _ = el.style().set_property("transform-origin", "top left");
    }
}

/// Writes bytes to xterm.js, with nothing to do once they are parsed.
pub fn write_bytes(term: &Terminal, bytes: &[u8]) {
    let nothing = js_sys::Function::new_no_args("");
    ext(term).write_bytes(&Uint8Array::from(bytes), &nothing);
}

/// Repaints `term` from a keyframe: reset, the keyframe's size, then its snapshot.
pub fn paint_keyframe(term: &Terminal, snapshot: &[u8], cols: u16, rows: u16) {
    term.reset();
    term.resize(u32::from(cols), u32::from(rows));
    write_bytes(term, snapshot);
}
