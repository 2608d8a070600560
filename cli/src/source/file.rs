//! BenchmarkResults from files: YAML (one or more documents) or JSON, each document a
//! BenchmarkResult, a List of them (`kubectl get br -o yaml`), or a JSON array.

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use crds::result::BenchmarkResult;
use serde::Deserialize;
use serde_json::Value;

use super::{Loaded, MAX_FILE_BYTES, MAX_RESULTS};

/// Reads one file (at most [`MAX_FILE_BYTES`]) and parses the results in it.
pub fn read(path: &Path) -> Result<Vec<Loaded>> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {shown}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {shown}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        bail!(
            "{shown} is larger than {} MiB; refusing to read it",
            MAX_FILE_BYTES / (1024 * 1024)
        );
    }
    let text = String::from_utf8(bytes).with_context(|| format!("{shown} is not UTF-8 text"))?;
    parse(&text, &shown)
}

/// Parses the results in a file's text; `origin` names the file in messages.
pub fn parse(text: &str, origin: &str) -> Result<Vec<Loaded>> {
    let documents = documents(text).with_context(|| format!("{origin} is not YAML or JSON"))?;
    let mut out = Vec::new();
    for (i, doc) in documents.into_iter().enumerate() {
        let place = format!("{origin}, document {}", i.saturating_add(1));
        for (j, item) in items(doc, &place)?.into_iter().enumerate() {
            if out.len() >= MAX_RESULTS {
                bail!("{origin} holds more than {MAX_RESULTS} results");
            }
            let at = format!("{place}, item {}", j.saturating_add(1));
            out.push(result(item, &at)?);
        }
    }
    if out.is_empty() {
        bail!("{origin} holds no BenchmarkResult");
    }
    Ok(out)
}

/// The documents of a YAML stream, or the one JSON value.
fn documents(text: &str) -> Result<Vec<Value>> {
    if text.trim_start().starts_with(['{', '[']) {
        return Ok(vec![serde_json::from_str(text)?]);
    }
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        if docs.len() > MAX_RESULTS {
            bail!("more than {MAX_RESULTS} documents");
        }
        let v = Value::deserialize(doc)?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

/// The objects of one document: itself, a List's items, or an array's elements.
fn items(doc: Value, place: &str) -> Result<Vec<Value>> {
    match doc {
        Value::Array(items) => Ok(items),
        Value::Object(mut map) => {
            let kind = map
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let kind = kind.as_str();
            if kind == "BenchmarkResult" {
                return Ok(vec![Value::Object(map)]);
            }
            if kind.ends_with("List") {
                return match map.remove("items") {
                    Some(Value::Array(items)) => Ok(items),
                    Some(Value::Null) | None => Ok(vec![]),
                    Some(_) => bail!("{place}: a {} whose items are not a list", shown(kind)),
                };
            }
            bail!(
                "{place} is a {}, not a BenchmarkResult or a List of them",
                shown(if kind.is_empty() {
                    "object without kind"
                } else {
                    kind
                })
            )
        }
        _ => bail!("{place} is not an object"),
    }
}

fn shown(kind: &str) -> String {
    crate::text::label(kind)
}

fn result(item: Value, at: &str) -> Result<Loaded> {
    let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != "BenchmarkResult" {
        bail!(
            "{at} is a {}, not a BenchmarkResult",
            shown(if kind.is_empty() {
                "object without kind"
            } else {
                kind
            })
        );
    }
    let r: BenchmarkResult = serde_json::from_value(item)
        .with_context(|| format!("{at} is not a valid BenchmarkResult"))?;
    let name = r.metadata.name.clone().unwrap_or_default();
    Ok(Loaded {
        origin: if name.is_empty() {
            at.to_string()
        } else {
            format!("{at} ({})", shown(&name))
        },
        name,
        created: r.metadata.creation_timestamp.clone(),
        spec: r.spec,
        conditions: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
apiVersion: netbench.io/v1alpha1
kind: BenchmarkResult
metadata: {name: web-1}
spec:
  benchmark: {kind: IngressBenchmark, namespace: team-a, name: web}
  benchmarkUid: u
  runId: r1
  specHash: abc
  benchmarkSpec: "{}"
  phase: Succeeded
"#;

    #[test]
    fn yaml_documents_lists_and_json_all_parse() {
        let two = format!("{ONE}---\n{ONE}");
        assert_eq!(parse(&two, "f").unwrap().len(), 2);
        let list: Value = serde_yaml::from_str(ONE).unwrap();
        let json =
            serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [list.clone(), list]});
        let got = parse(&json.to_string(), "f").unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name, "web-1");
        assert_eq!(got[0].spec.run_id, "r1");
    }

    #[test]
    fn other_objects_and_garbage_are_refused_with_the_place() {
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
        let e = format!("{:#}", parse(cm, "cm.yaml").unwrap_err());
        assert!(e.contains("cm.yaml, document 1 is a ConfigMap"), "{e}");
        let e = format!(
            "{:#}",
            parse("kind: BenchmarkResult\nspec: 3\n", "f").unwrap_err()
        );
        assert!(e.contains("not a valid BenchmarkResult"), "{e}");
        assert!(parse("", "empty").is_err());
        assert!(parse("{", "broken").is_err());
        assert!(parse(": : :\n\t-", "broken").is_err());
    }

    #[test]
    fn too_many_results_are_refused() {
        let one: Value = serde_yaml::from_str(ONE).unwrap();
        let many = Value::Array(vec![one; MAX_RESULTS + 1]);
        let e = format!("{:#}", parse(&many.to_string(), "big").unwrap_err());
        assert!(e.contains("more than 1000"), "{e}");
    }

    #[test]
    fn a_file_over_the_limit_is_not_read() {
        let dir = std::env::temp_dir().join(format!("netbench-cli-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.yaml");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = format!("{:#}", read(&path).unwrap_err());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("larger than 16 MiB"), "{e}");
    }
}
