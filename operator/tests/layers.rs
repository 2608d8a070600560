//! The operator's layers, checked (fast tier, no tool but `syn`): every path into the crate
//! (`use crate::..`, `crate::..` and `super::..` in items, expressions, types and macro
//! arguments) of every module reachable from lib.rs is resolved to the top-level module it
//! names. The test fails when two top-level modules depend on each other through any chain (an
//! import cycle) and when a module imports from a layer above its own, by the table
//! `operator::LAYERS` (lib.rs, the one place the layers are written down). Imports within one
//! layer are allowed as long as they form no cycle.
//!
//! Test code (`#[cfg(test)]` items and the files of `#[cfg(test)] mod x;`) is left out: a unit
//! test may reach for the fake API server or a kind to exercise its module. main.rs is wiring
//! on top of everything and is not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// One module's paths into the crate: (top-level module it names, file it is written in).
type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

#[test]
fn no_import_cycles_and_no_upward_imports() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = crate_graph(&src);
    let tops: BTreeSet<String> = graph.tops.clone();

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
        listed, tops,
        "operator::LAYERS must list exactly the top-level modules of lib.rs"
    );

    let upward = upward_imports(&graph.edges, &layer_of);
    let cycles = cycles(&graph.edges);
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

/// The checker itself finds what it must: a cycle through `super::` and a grouped `use`, a
/// path inside a macro, and an upward import; and it skips test code and visibility paths.
#[test]
fn the_checker_sees_uses_paths_macros_and_super() {
    let file: syn::File = syn::parse_str(
        r#"
        use crate::{a::X, b};
        pub(in crate::zz) fn f() { let _ = format!("{}", crate::c::Y); super::d::g(); }
        #[cfg(test)]
        mod tests { use crate::e::T; }
        "#,
    )
    .unwrap();
    let mut v = Collector::new(vec!["m".into(), "inner".into()]);
    v.visit_file(&file);
    let named: BTreeSet<String> = v.found.into_iter().map(|(top, _)| top).collect();
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

struct Graph {
    tops: BTreeSet<String>,
    edges: Edges,
}

/// Walks the module tree from lib.rs.
fn crate_graph(src: &Path) -> Graph {
    let lib = parse(&src.join("lib.rs"));
    let mut graph = Graph {
        tops: BTreeSet::new(),
        edges: Edges::new(),
    };
    for (name, test_only) in file_modules(&lib) {
        graph.tops.insert(name.clone());
        if !test_only {
            walk(src, &src.join(&name), &name, vec![name.clone()], &mut graph);
        }
    }
    graph
}

/// The module `path` (e.g. ["driver", "phases"]) whose file is `base.rs` or `base/mod.rs`;
/// its own `mod x;` children live in `base/x.rs` or `base/x/mod.rs`.
fn walk(src: &Path, base: &Path, top: &str, path: Vec<String>, graph: &mut Graph) {
    let flat = base.with_extension("rs");
    let file = if flat.exists() {
        flat
    } else {
        base.join("mod.rs")
    };
    let ast = parse(&file);
    let shown = file
        .strip_prefix(src)
        .unwrap_or(&file)
        .display()
        .to_string();
    let mut collector = Collector::new(path.clone());
    collector.visit_file(&ast);
    for (to, _) in collector.found {
        if to != top {
            graph
                .edges
                .entry(top.to_string())
                .or_default()
                .entry(to)
                .or_default()
                .insert(shown.clone());
        }
    }
    for (child, test_only) in file_modules(&ast) {
        if !test_only {
            let mut p = path.clone();
            p.push(child.clone());
            walk(src, &base.join(&child), top, p, graph);
        }
    }
}

fn parse(file: &Path) -> syn::File {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", file.display()))
}

/// The `mod x;` declarations of a file (children in their own files), with whether they are
/// test code.
fn file_modules(file: &syn::File) -> Vec<(String, bool)> {
    file.items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if m.content.is_none() => {
                Some((m.ident.to_string(), is_test(&m.attrs)))
            }
            _ => None,
        })
        .collect()
}

/// `#[cfg(test)]`
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

/// Collects the top-level modules a file's non-test code names, from the module `path`.
struct Collector {
    /// The module being visited (inline `mod x { .. }` pushes onto it).
    path: Vec<String>,
    /// (top-level module, how it was named)
    found: Vec<(String, String)>,
}

impl Collector {
    fn new(path: Vec<String>) -> Collector {
        Collector {
            path,
            found: vec![],
        }
    }

    /// `segments` as written (`crate`, `super`, `self` or anything else first).
    fn resolve(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else {
            return;
        };
        let mut at: Vec<String> = match first.as_str() {
            "crate" => vec![],
            "super" | "self" => self.path.clone(),
            _ => return,
        };
        let mut rest = segments.iter().peekable();
        if first == "crate" {
            rest.next();
        }
        while let Some(s) = rest.peek() {
            match s.as_str() {
                "super" => {
                    at.pop();
                }
                "self" => {}
                _ => break,
            }
            rest.next();
        }
        let top = match at.first() {
            Some(top) => Some(top.clone()),
            None => rest.next().cloned(),
        };
        if let Some(top) = top {
            self.found.push((top, segments.join("::")));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.leaf(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.leaf(prefix, &r.ident),
            syn::UseTree::Glob(_) => {
                let p = prefix.clone();
                self.resolve(&p);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn leaf(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut p = prefix.to_vec();
        p.push(ident.to_string());
        self.resolve(&p);
    }

    /// `crate :: x` and `super :: x` sequences in a macro's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let flat: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < flat.len() {
            if let TokenTree::Group(g) = &flat[i] {
                self.tokens(g.stream());
            }
            if let TokenTree::Ident(id) = &flat[i] {
                if id == "crate" || id == "super" {
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
                        self.resolve(&segments);
                    }
                    i = j;
                    continue;
                }
            }
            i += 1;
        }
    }
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
        if segments.len() > 1 {
            self.resolve(&segments);
        }
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
