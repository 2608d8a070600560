//! The operator's layers and files, checked (fast tier, no tool but `syn`). Every path of every
//! module reachable from lib.rs (`use` trees, paths in items, expressions, types and macro
//! arguments) is resolved to the module it names: `crate::..`, `super::..` and `self::..`, a
//! child module's name (`phases::admit::handle`) and a name brought in by a `use` of the same
//! module (`use super::phases;` then `phases::..`). A path naming an item inside a module counts
//! as an import of that module's file; a parent's `mod child;` alone is no import, but a child
//! using its parent's items through `super::` is, and so is a parent using (or re-exporting)
//! its child's. The checks:
//!
//! - top level: no two top-level modules depend on each other through any chain (an import
//!   cycle), and no module imports from a layer above its own, by the table `operator::LAYERS`
//!   (lib.rs, the one place the layers are written down); imports within one layer are allowed
//!   as long as they form no cycle;
//! - files: no import cycle between any two files (modules) of the crate, at any depth
//!   (`driver/machine.rs` and `driver/phases/` may not use each other: what both need goes to
//!   a lower file), but for the cycles of `CYCLE_EXCEPTIONS` (each one there today and left to
//!   other changes; a new cycle fails, and so does an exception that is gone);
//! - kinds: the kind-neutral modules (`NEUTRAL`: driver, run, results, policy) name no kind: no
//!   path into `crate::ingress` or `crate::egress`, no `crds::ingress::..` or `crds::egress::..`
//!   and no `IngressBenchmark..`/`EgressBenchmark..` type, but for the exceptions of
//!   `KIND_EXCEPTIONS` (each one there today; a new one fails, and so does one that is gone).
//!
//! Test code (`#[cfg(test)]` items and the files of `#[cfg(test)] mod x;`) is left out: a unit
//! test may reach for the fake API server or a kind to exercise its module. main.rs is wiring
//! on top of everything and is not checked. Method calls are not paths: a file calling a method
//! of a type it never names does not import the type's file (it names it somewhere to get one).
//!
//! The self-tests at the end feed the same functions small synthetic crates, one that breaks
//! each rule and one that keeps it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The modules that work for every kind alike and so may name none.
const NEUTRAL: &[&str] = &["driver", "run", "results", "policy"];

/// The top-level modules of the kinds.
const KINDS: &[&str] = &["ingress", "egress"];

/// The places a neutral module names a kind today: (file under src/, path as written).
const KIND_EXCEPTIONS: &[(&str, &str)] = &[];

/// The file cycles there are today, each as its files, to be removed from this list as they go:
/// a cycle through other files, or an entry whose cycle is gone, fails.
const CYCLE_EXCEPTIONS: &[&[&str]] = &[];

/// A graph: module -> module it imports -> how (the files, or the paths as written).
type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Source files by their path under src/ ("driver/mod.rs"), with their text.
type Files = BTreeMap<String, String>;

#[test]
fn no_import_cycles_and_no_upward_imports() {
    let krate = read_crate(&operator_files());

    // The table names every top-level module exactly once, and nothing else.
    let mut layer_of = BTreeMap::new();
    for (i, (_, modules)) in operator::LAYERS.iter().enumerate() {
        for m in *modules {
            assert!(
                layer_of.insert(m.to_string(), i).is_none(),
                "{m} is in two layers of operator::LAYERS"
            );
        }
    }
    let listed: BTreeSet<String> = layer_of.keys().cloned().collect();
    assert_eq!(
        listed,
        krate.tops(),
        "operator::LAYERS must list exactly the top-level modules of lib.rs"
    );

    let edges = top_edges(&krate);
    let upward = upward_imports(&edges, &layer_of);
    let cycles = cycles(&edges);
    let mut problems = vec![];
    for c in &cycles {
        problems.push(format!("import cycle: {}", c.join(" -> ")));
    }
    for u in &upward {
        problems.push(u.clone());
    }
    assert!(
        problems.is_empty(),
        "{} import cycle(s), {} upward import(s):\n{}",
        cycles.len(),
        upward.len(),
        problems.join("\n")
    );
}

#[test]
fn no_import_cycles_between_files() {
    let krate = read_crate(&operator_files());
    let edges = file_edges(&krate);
    let problems = unexcused(&edges, &cycles(&edges), CYCLE_EXCEPTIONS);
    assert!(
        problems.is_empty(),
        "{} import cycle(s) between files:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The cycles not in `exceptions` (with the paths that make each step), and the exceptions no
/// cycle matches any more.
fn unexcused(edges: &Edges, cycles: &[Vec<String>], exceptions: &[&[&str]]) -> Vec<String> {
    let files = |c: &[String]| -> BTreeSet<String> { c.iter().cloned().collect() };
    let mut out = vec![];
    let mut used = BTreeSet::new();
    for c in cycles {
        let set = files(c);
        match exceptions
            .iter()
            .position(|e| e.iter().map(|f| f.to_string()).collect::<BTreeSet<_>>() == set)
        {
            Some(i) => {
                used.insert(i);
            }
            None => out.push(show_cycle(c, edges)),
        }
    }
    for (i, e) in exceptions.iter().enumerate() {
        if !used.contains(&i) {
            out.push(format!(
                "the cycle {} is gone; remove it from the exceptions",
                e.join(" <-> ")
            ));
        }
    }
    out
}

#[test]
fn the_kind_neutral_modules_name_no_kind() {
    let krate = read_crate(&operator_files());
    let problems = kind_names(&krate, NEUTRAL, KINDS, KIND_EXCEPTIONS);
    assert!(
        problems.is_empty(),
        "{} kind(s) named in a kind-neutral module:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A file cycle with the paths that make each step.
fn show_cycle(cycle: &[String], edges: &Edges) -> String {
    let mut out = cycle.first().cloned().unwrap_or_default();
    for pair in cycle.windows(2) {
        let how: Vec<&str> = edges[&pair[0]][&pair[1]]
            .iter()
            .map(String::as_str)
            .collect();
        out.push_str(&format!(" -> {} ({})", pair[1], how.join(", ")));
    }
    out
}

/// The checker itself finds what it must: a cycle through `super::` and a grouped `use`, a
/// path inside a macro, and an upward import; and it skips test code and visibility paths.
#[test]
fn the_checker_sees_uses_paths_macros_and_super() {
    let named = named_in(
        &["m", "inner"],
        r#"
        use crate::{a::X, b};
        pub(in crate::zz) fn f() { let _ = format!("{}", crate::c::Y); super::d::g(); }
        #[cfg(test)]
        mod tests { use crate::e::T; }
        "#,
    );
    let named: BTreeSet<String> = named
        .into_iter()
        .filter_map(|n| match n.target {
            Target::Internal(p) => p.first().cloned(),
            Target::External(_) => None,
        })
        .collect();
    let want: BTreeSet<String> = ["a", "b", "c", "m"].iter().map(|s| s.to_string()).collect();
    assert_eq!(
        named, want,
        "super::d from m::inner stays in m; e is test code"
    );

    let edges = edges_of(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]);
    assert_eq!(cycles(&edges), vec![vec!["a", "b", "c", "a"]]);
    let layers: BTreeMap<String, usize> = [("a", 0), ("b", 0), ("c", 1), ("d", 0)]
        .iter()
        .map(|(m, l)| (m.to_string(), *l))
        .collect();
    let up = upward_imports(&edges, &layers);
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(
        up[0].starts_with("b (layer 0) imports c (layer 1) in b.rs"),
        "{up:?}"
    );
}

fn edges_of(pairs: &[(&str, &str)]) -> Edges {
    let mut edges = Edges::new();
    for (a, b) in pairs {
        edges
            .entry(a.to_string())
            .or_default()
            .entry(b.to_string())
            .or_default()
            .insert(format!("{a}.rs"));
    }
    edges
}

/// Every import from a module to one in a higher layer, with the files that make it.
fn upward_imports(edges: &Edges, layer_of: &BTreeMap<String, usize>) -> Vec<String> {
    let mut out = vec![];
    for (from, tos) in edges {
        let Some(&lf) = layer_of.get(from) else {
            continue;
        };
        for (to, files) in tos {
            let Some(&lt) = layer_of.get(to) else {
                continue;
            };
            if lt > lf {
                let files: Vec<&str> = files.iter().map(String::as_str).collect();
                out.push(format!(
                    "{from} (layer {lf}) imports {to} (layer {lt}) in {}",
                    files.join(", ")
                ));
            }
        }
    }
    out
}

/// The import cycles: for every module that reaches itself, the shortest way back, each
/// cycle once (whichever module it was found from). Modules on several cycles form one
/// group of mutually dependent modules; every cycle of it is listed.
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = edges
        .iter()
        .flat_map(|(a, tos)| std::iter::once(a).chain(tos.keys()))
        .collect();
    let reaches = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for next in edges.get(&n).into_iter().flat_map(|t| t.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reaches(n))).collect();
    let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut out = vec![];
    for n in &nodes {
        if !reach[n].contains(*n) {
            continue;
        }
        let group: BTreeSet<String> = reach[n]
            .iter()
            .filter(|m| reach.get(m).is_some_and(|r| r.contains(*n)))
            .cloned()
            .collect();
        let path = path_back(edges, n, &group);
        // The same cycle found from another of its modules: compare the rotation that starts
        // at its smallest module.
        let ring = &path[..path.len().saturating_sub(1)];
        let least = ring
            .iter()
            .enumerate()
            .min_by_key(|(_, m)| *m)
            .map_or(0, |(i, _)| i);
        let canonical: Vec<String> = ring[least..]
            .iter()
            .chain(&ring[..least])
            .cloned()
            .collect();
        if seen.insert(canonical) {
            out.push(path);
        }
    }
    out
}

/// A shortest path from `start` back to itself inside `group` (breadth first).
fn path_back(edges: &Edges, start: &String, group: &BTreeSet<String>) -> Vec<String> {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.clone()]);
    while let Some(n) = queue.pop_front() {
        for next in edges.get(&n).into_iter().flat_map(|t| t.keys()) {
            if !group.contains(next) {
                continue;
            }
            if next == start {
                let mut path = vec![start.clone()];
                let mut at = n.clone();
                while at != *start {
                    path.push(at.clone());
                    at = parent[&at].clone();
                }
                path.push(start.clone());
                path.reverse();
                return path;
            }
            if !parent.contains_key(next) {
                parent.insert(next.clone(), n.clone());
                queue.push_back(next.clone());
            }
        }
    }
    vec![start.clone()]
}

/// Every .rs file under the operator's src/.
fn operator_files() -> Files {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Files::new();
    let mut todo = vec![src.clone()];
    while let Some(dir) = todo.pop() {
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.strip_prefix(&src).expect("under src").display();
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                files.insert(name.to_string().replace('\\', "/"), text);
            }
        }
    }
    files
}

/// What a path names: a module or item of this crate (the path from the crate root), or
/// anything else (another crate, a generic parameter, a local name), as written.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    Internal(Vec<String>),
    External(Vec<String>),
}

/// A path in non-test code.
#[derive(Debug)]
struct Named {
    /// The file it is written in.
    file: String,
    /// The module it is written in (an inline `mod x { .. }` is a module of its file).
    module: Vec<String>,
    /// As written (a `use` tree's leaf with its prefix).
    written: String,
    target: Target,
}

/// The crate as the checks see it.
struct Crate {
    /// Every module (inline ones too) and the file it is written in; the root is lib.rs.
    modules: BTreeMap<Vec<String>, String>,
    named: Vec<Named>,
}

impl Crate {
    fn tops(&self) -> BTreeSet<String> {
        self.modules
            .keys()
            .filter(|m| m.len() == 1)
            .map(|m| m[0].clone())
            .collect()
    }

    /// The file of the module a crate path names or names an item of (its longest prefix
    /// that is a module).
    fn file_of(&self, path: &[String]) -> &str {
        (0..=path.len())
            .rev()
            .find_map(|n| self.modules.get(&path[..n]))
            .map_or("lib.rs", String::as_str)
    }
}

/// Reads the module tree from lib.rs and resolves every path of its non-test code.
fn read_crate(files: &Files) -> Crate {
    let mut modules = BTreeMap::from([(vec![], "lib.rs".to_string())]);
    let lib = parse(files, "lib.rs");
    let mut parsed = vec![];
    module_tree(files, &lib.items, "", &[], &mut modules, &mut parsed);
    parsed.insert(0, (vec![], "lib.rs".to_string(), lib));
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    let mut named = vec![];
    for (module, file, ast) in &parsed {
        let mut collector = Collector::new(module.clone());
        collector.visit_file(ast);
        named.extend(collector.resolve(&known, file));
    }
    Crate { modules, named }
}

/// The modules declared in `items` (of module `path`, whose `mod x;` files are in `dir`), their
/// children, and the parsed file of each that has one.
fn module_tree(
    files: &Files,
    items: &[syn::Item],
    dir: &str,
    path: &[String],
    modules: &mut BTreeMap<Vec<String>, String>,
    parsed: &mut Vec<(Vec<String>, String, syn::File)>,
) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if is_test(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        let mut child = path.to_vec();
        child.push(name.clone());
        let inner_dir = format!("{dir}{name}/");
        match &m.content {
            Some((_, inner)) => {
                let file = modules[path].clone();
                modules.insert(child.clone(), file);
                module_tree(files, inner, &inner_dir, &child, modules, parsed);
            }
            None => {
                let flat = format!("{dir}{name}.rs");
                let file = if files.contains_key(&flat) {
                    flat
                } else {
                    format!("{dir}{name}/mod.rs")
                };
                let ast = parse(files, &file);
                modules.insert(child.clone(), file.clone());
                module_tree(files, &ast.items, &inner_dir, &child, modules, parsed);
                parsed.push((child, file, ast));
            }
        }
    }
}

fn parse(files: &Files, file: &str) -> syn::File {
    let text = files
        .get(file)
        .unwrap_or_else(|| panic!("{file}: no such file"));
    syn::parse_file(text).unwrap_or_else(|e| panic!("parsing {file}: {e}"))
}

/// Top-level module -> top-level module it imports -> the files that do.
fn top_edges(krate: &Crate) -> Edges {
    let mut edges = Edges::new();
    for n in &krate.named {
        let Target::Internal(to) = &n.target else {
            continue;
        };
        let (Some(from), Some(to)) = (n.module.first(), to.first()) else {
            continue;
        };
        if from != to && krate.modules.contains_key(std::slice::from_ref(to)) {
            edges
                .entry(from.clone())
                .or_default()
                .entry(to.clone())
                .or_default()
                .insert(n.file.clone());
        }
    }
    edges
}

/// File -> file it imports -> the paths that do, as written.
fn file_edges(krate: &Crate) -> Edges {
    let mut edges = Edges::new();
    for n in &krate.named {
        let Target::Internal(to) = &n.target else {
            continue;
        };
        let to = krate.file_of(to);
        if to != n.file {
            edges
                .entry(n.file.clone())
                .or_default()
                .entry(to.to_string())
                .or_default()
                .insert(n.written.clone());
        }
    }
    edges
}

/// Every place a module of `neutral` names a kind (a module of `kinds`, its API types in
/// `crds`), but for the `allowed` (file, path) pairs; and every allowed pair no longer there.
fn kind_names(
    krate: &Crate,
    neutral: &[&str],
    kinds: &[&str],
    allowed: &[(&str, &str)],
) -> Vec<String> {
    let is_kind = |s: &String| kinds.contains(&s.as_str());
    let is_kind_type = |s: &String| {
        kinds.iter().any(|k| {
            let mut capital = k.to_string();
            capital[..1].make_ascii_uppercase();
            s.starts_with(&format!("{capital}Benchmark"))
        })
    };
    let mut out = vec![];
    let mut used = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for n in &krate.named {
        if !n
            .module
            .first()
            .is_some_and(|m| neutral.contains(&m.as_str()))
        {
            continue;
        }
        let kind = match &n.target {
            Target::Internal(p) => p.first().is_some_and(is_kind) || p.iter().any(is_kind_type),
            Target::External(p) => {
                (p.first().is_some_and(|c| c == "crds") && p.get(1).is_some_and(is_kind))
                    || p.iter().any(is_kind_type)
            }
        };
        if !kind {
            continue;
        }
        let key = (n.file.as_str(), n.written.as_str());
        if allowed.contains(&key) {
            used.insert(key);
        } else if seen.insert(key) {
            out.push(format!("{}: {} names a kind", n.file, n.written));
        }
    }
    for a in allowed {
        if !used.contains(a) {
            out.push(format!(
                "{}: {} is no longer there; remove it from the exceptions",
                a.0, a.1
            ));
        }
    }
    out
}

/// `#[cfg(test)]`
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

/// One path as written in a module, before it is resolved.
struct Raw {
    module: Vec<String>,
    segments: Vec<String>,
    /// For a `use` leaf, the name it brings in (`None` for a glob).
    brings: Option<String>,
}

/// Collects the paths of a file's non-test code, from the module `path`.
struct Collector {
    /// The module being visited (inline `mod x { .. }` pushes onto it).
    path: Vec<String>,
    uses: Vec<Raw>,
    paths: Vec<Raw>,
}

impl Collector {
    fn new(path: Vec<String>) -> Collector {
        Collector {
            path,
            uses: vec![],
            paths: vec![],
        }
    }

    /// The paths resolved: first the names each module's `use`s bring in, then every path.
    fn resolve(self, modules: &BTreeSet<Vec<String>>, file: &str) -> Vec<Named> {
        let mut aliases: BTreeMap<(Vec<String>, String), Target> = BTreeMap::new();
        // Twice: a `use` may build on a name another one brings in further down.
        for _ in 0..2 {
            for u in &self.uses {
                if let (Some(name), Some(t)) = (
                    &u.brings,
                    resolve(modules, &aliases, &u.module, &u.segments),
                ) {
                    aliases.insert((u.module.clone(), name.clone()), t);
                }
            }
        }
        self.uses
            .iter()
            .chain(&self.paths)
            .filter_map(|r| {
                let target = resolve(modules, &aliases, &r.module, &r.segments)?;
                Some(Named {
                    file: file.to_string(),
                    module: r.module.clone(),
                    written: r.segments.join("::"),
                    target,
                })
            })
            .collect()
    }

    fn path(&mut self, segments: Vec<String>) {
        self.paths.push(Raw {
            module: self.path.clone(),
            segments,
            brings: None,
        });
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.leaf(prefix, &n.ident, &n.ident),
            syn::UseTree::Rename(r) => self.leaf(prefix, &r.ident, &r.rename),
            syn::UseTree::Glob(_) => self.uses.push(Raw {
                module: self.path.clone(),
                segments: prefix.clone(),
                brings: None,
            }),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// `prefix::ident as brings` (`prefix::{self}` brings the prefix's last name).
    fn leaf(&mut self, prefix: &[String], ident: &syn::Ident, brings: &syn::Ident) {
        let mut segments = prefix.to_vec();
        let mut name = brings.to_string();
        if ident == "self" {
            if brings == "self" {
                name = prefix.last().cloned().unwrap_or_default();
            }
        } else {
            segments.push(ident.to_string());
        }
        self.uses.push(Raw {
            module: self.path.clone(),
            segments,
            brings: Some(name),
        });
    }

    /// `a :: b :: ..` sequences in a macro's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let flat: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < flat.len() {
            if let TokenTree::Group(g) = &flat[i] {
                self.tokens(g.stream());
            }
            if let TokenTree::Ident(id) = &flat[i] {
                let mut segments = vec![id.to_string()];
                let mut j = i + 1;
                while let (
                    Some(TokenTree::Punct(a)),
                    Some(TokenTree::Punct(b)),
                    Some(TokenTree::Ident(next)),
                ) = (flat.get(j), flat.get(j + 1), flat.get(j + 2))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    segments.push(next.to_string());
                    j += 3;
                }
                if segments.len() > 1 {
                    self.path(segments);
                    i = j;
                    continue;
                }
            }
            i += 1;
        }
    }
}

/// What `segments`, written in `module`, name. A path starting with a name no `use` of the
/// module brings in and no child module has is another crate's (or a local or generic name).
fn resolve(
    modules: &BTreeSet<Vec<String>>,
    aliases: &BTreeMap<(Vec<String>, String), Target>,
    module: &[String],
    segments: &[String],
) -> Option<Target> {
    let first = segments.first()?;
    let (mut at, mut rest) = match first.as_str() {
        "crate" => (vec![], &segments[1..]),
        "super" | "self" => (module.to_vec(), segments),
        _ => {
            if segments.len() == 1 {
                // A name alone: a local, or what a `use` brought in (that `use` is the import).
                return Some(Target::External(segments.to_vec()));
            }
            let rest = segments[1..].iter().cloned();
            if let Some(t) = aliases.get(&(module.to_vec(), first.clone())) {
                return Some(match t {
                    Target::Internal(p) => {
                        Target::Internal(p.iter().cloned().chain(rest).collect())
                    }
                    Target::External(p) => {
                        Target::External(p.iter().cloned().chain(rest).collect())
                    }
                });
            }
            let mut child = module.to_vec();
            child.push(first.clone());
            if modules.contains(&child) {
                return Some(Target::Internal(child.into_iter().chain(rest).collect()));
            }
            return Some(Target::External(segments.to_vec()));
        }
    };
    while let Some((s, after)) = rest.split_first() {
        match s.as_str() {
            "super" => {
                at.pop();
            }
            "self" => {}
            _ => break,
        }
        rest = after;
    }
    at.extend(rest.iter().cloned());
    Some(Target::Internal(at))
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Type(t) => &t.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => &[],
        };
        if is_test(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // Children in their own files are walked from the file tree.
        if m.content.is_some() {
            self.path.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.path.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut vec![], &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.path(segments);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    /// `pub(in crate::x)` says who may see an item, it imports nothing.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

// The self-tests: each rule broken and kept by a small crate, through the functions above.

/// A synthetic crate from (file under src/, text) pairs.
fn synthetic(files: &[(&str, &str)]) -> Crate {
    let files: Files = files
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    read_crate(&files)
}

/// The paths of `text` written in `module`, resolved knowing no modules.
fn named_in(module: &[&str], text: &str) -> Vec<Named> {
    let file: syn::File = syn::parse_str(text).unwrap();
    let mut collector = Collector::new(module.iter().map(|s| s.to_string()).collect());
    collector.visit_file(&file);
    collector.resolve(&BTreeSet::new(), "x.rs")
}

#[test]
fn a_cycle_between_top_level_modules_is_found() {
    let lib = "pub mod a; pub mod b;";
    let a = "use crate::b::Bee; pub struct Ay(pub Bee);";
    let broken = synthetic(&[
        ("lib.rs", lib),
        ("a.rs", a),
        ("b/mod.rs", "mod inner; pub struct Bee;"),
        ("b/inner.rs", "pub fn f() -> crate::a::Ay { todo!() }"),
    ]);
    assert_eq!(cycles(&top_edges(&broken)), vec![vec!["a", "b", "a"]]);
    let kept = synthetic(&[
        ("lib.rs", lib),
        ("a.rs", a),
        ("b/mod.rs", "mod inner; pub struct Bee;"),
        ("b/inner.rs", "pub fn f() -> super::Bee { todo!() }"),
    ]);
    assert_eq!(cycles(&top_edges(&kept)), Vec::<Vec<String>>::new());
}

#[test]
fn an_upward_import_is_found() {
    let layers: BTreeMap<String, usize> = [("low", 0), ("high", 1)]
        .iter()
        .map(|(m, l)| (m.to_string(), *l))
        .collect();
    let lib = "pub mod high; pub mod low;";
    let broken = synthetic(&[
        ("lib.rs", lib),
        ("high.rs", "pub struct H;"),
        ("low.rs", "pub fn f() { let _ = crate::high::H; }"),
    ]);
    let up = upward_imports(&top_edges(&broken), &layers);
    assert_eq!(
        up,
        vec!["low (layer 0) imports high (layer 1) in low.rs".to_string()]
    );
    let kept = synthetic(&[
        ("lib.rs", lib),
        ("high.rs", "use crate::low; pub fn g() { low::f() }"),
        ("low.rs", "pub fn f() {}"),
    ]);
    assert_eq!(
        upward_imports(&top_edges(&kept), &layers),
        Vec::<String>::new()
    );
}

#[test]
fn a_cycle_between_files_is_found() {
    // machine calls a phase handler (through a name its `use` brings in), the phase uses
    // machine's `fail`: a cycle inside one top-level module.
    let lib = "pub mod driver;";
    let driver = "mod machine; mod phases; mod transition;";
    let machine = "use super::phases; pub fn advance() { phases::admit::handle() }";
    let broken = synthetic(&[
        ("lib.rs", lib),
        ("driver/mod.rs", driver),
        (
            "driver/machine.rs",
            &format!("{machine} pub fn fail() {{}}"),
        ),
        ("driver/phases/mod.rs", "pub mod admit;"),
        (
            "driver/phases/admit.rs",
            "use super::super::machine::fail; pub fn handle() { fail() }",
        ),
        ("driver/transition.rs", ""),
    ]);
    let edges = file_edges(&broken);
    assert_eq!(
        cycles(&edges),
        vec![vec![
            "driver/machine.rs",
            "driver/phases/admit.rs",
            "driver/machine.rs"
        ]],
        "{edges:?}"
    );
    let kept = synthetic(&[
        ("lib.rs", lib),
        ("driver/mod.rs", driver),
        ("driver/machine.rs", machine),
        ("driver/phases/mod.rs", "pub mod admit;"),
        (
            "driver/phases/admit.rs",
            "use crate::driver::transition::fail; pub fn handle() { fail() }",
        ),
        ("driver/transition.rs", "pub fn fail() {}"),
    ]);
    assert_eq!(cycles(&file_edges(&kept)), Vec::<Vec<String>>::new());

    // A parent's `mod child;` is no import; its child using the parent's items is, and the
    // parent using (or re-exporting) the child's then closes a cycle.
    let child = ("m/c.rs", "use super::P; pub struct C(pub P);");
    let only_declared = synthetic(&[
        ("lib.rs", "pub mod m;"),
        ("m/mod.rs", "mod c; pub struct P;"),
        child,
    ]);
    assert_eq!(
        cycles(&file_edges(&only_declared)),
        Vec::<Vec<String>>::new()
    );
    let re_exported = synthetic(&[
        ("lib.rs", "pub mod m;"),
        ("m/mod.rs", "mod c; pub use c::C; pub struct P;"),
        child,
    ]);
    let edges = file_edges(&re_exported);
    let found = cycles(&edges);
    assert_eq!(found, vec![vec!["m/c.rs", "m/mod.rs", "m/c.rs"]]);

    // An exception excuses its own cycle only, and one that is gone is reported.
    assert_eq!(
        unexcused(&edges, &found, &[&["m/mod.rs", "m/c.rs"]]),
        Vec::<String>::new()
    );
    let problems = unexcused(&edges, &found, &[&["m/mod.rs", "m/d.rs"]]);
    let [cycle, gone] = problems.as_slice() else {
        panic!("one cycle, one stale exception: {problems:?}");
    };
    assert!(
        cycle.starts_with("m/c.rs -> m/mod.rs (super::P)"),
        "{cycle}"
    );
    assert!(gone.contains("m/mod.rs <-> m/d.rs is gone"), "{gone}");
}

#[test]
fn a_kind_named_in_a_neutral_module_is_found() {
    let lib = "pub mod driver; pub mod ingress; pub mod run;";
    let broken = synthetic(&[
        ("lib.rs", lib),
        (
            "driver.rs",
            r#"
            use crate::ingress::Target;
            use crds::{egress::PairResult, Phase};
            pub fn f(_: crds::IngressBenchmark) { let _ = format!("{}", crds::ingress::X); }
            #[cfg(test)]
            mod tests { use crds::EgressBenchmark; use crate::ingress::Y; }
            "#,
        ),
        ("ingress.rs", "pub struct Target; use crate::driver::f;"),
        ("run.rs", "pub struct Run;"),
    ]);
    let found = kind_names(&broken, &["driver", "run"], KINDS, &[]);
    assert_eq!(
        found,
        vec![
            "driver.rs: crate::ingress::Target names a kind",
            "driver.rs: crds::egress::PairResult names a kind",
            "driver.rs: crds::IngressBenchmark names a kind",
            "driver.rs: crds::ingress::X names a kind",
        ],
        "a kind's module, its crds types and its object; ingress may name driver; tests may"
    );
    // An exception silences its own path only, and one that is gone is reported.
    let allowed = [
        ("driver.rs", "crds::egress::PairResult"),
        ("run.rs", "crds::egress::Gone"),
    ];
    let found = kind_names(&broken, &["driver", "run"], KINDS, &allowed);
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(!found.iter().any(|p| p.contains("PairResult")), "{found:?}");
    assert!(found[3].starts_with("run.rs: crds::egress::Gone is no longer there"));

    let kept = synthetic(&[
        ("lib.rs", lib),
        (
            "driver.rs",
            "use crate::run::Run; use crds::Phase; pub fn f(_: Run) {}",
        ),
        ("ingress.rs", "use crate::driver::f;"),
        ("run.rs", "pub struct Run;"),
    ]);
    assert_eq!(
        kind_names(&kept, &["driver", "run"], KINDS, &[]),
        Vec::<String>::new()
    );
}
