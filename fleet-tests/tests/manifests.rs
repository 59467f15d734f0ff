//! Static checks of `deploy/`, against the real binaries: every YAML file parses; the
//! kustomizations hold together; every `VOXGATE_*` variable and `--flag` named by a manifest,
//! the compose file, a Dockerfile or the README exists in the `--help` of the binary it
//! configures; ports agree between listen settings, container ports, Services, probes,
//! network policies, EXPOSE and published ports; drain and stop timings nest; secrets come
//! from secret objects. The container health check script is run against the binaries.
//!
//! Nothing here needs a cluster or a Docker engine. Where `kubectl` is installed, the overlay
//! is also rendered with `kubectl kustomize`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use voxgate_fleet_tests::{binaries, metrics_text, Proc};
use yaml_rust2::{Yaml, YamlLoader};

// ---- files --------------------------------------------------------------------------------

fn deploy_dir() -> PathBuf {
    binaries::workspace_root().join("deploy")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name() != Some("secrets".as_ref()) {
                yaml_files(&p, out);
            }
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
}

/// Every document of a YAML file, merge keys (`<<`) resolved.
fn load(path: &Path) -> Vec<Yaml> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs = YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
    docs.into_iter().map(resolve_merges).collect()
}

fn resolve_merges(y: Yaml) -> Yaml {
    match y {
        Yaml::Hash(h) => {
            let mut out = yaml_rust2::yaml::Hash::new();
            let merge_key = Yaml::String("<<".into());
            let mut own = Vec::new();
            for (k, v) in h {
                let v = resolve_merges(v);
                if k == merge_key {
                    let bases = match v {
                        Yaml::Array(a) => a,
                        other => vec![other],
                    };
                    for b in bases {
                        if let Yaml::Hash(bh) = b {
                            for (bk, bv) in bh {
                                out.insert(bk, bv);
                            }
                        }
                    }
                } else {
                    own.push((k, v));
                }
            }
            // Explicit keys win over merged ones.
            for (k, v) in own {
                out.insert(k, v);
            }
            Yaml::Hash(out)
        }
        Yaml::Array(a) => Yaml::Array(a.into_iter().map(resolve_merges).collect()),
        other => other,
    }
}

/// A scalar as text (strings, numbers, booleans).
fn text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Real(r) => Some(r.clone()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn int(y: &Yaml) -> Option<i64> {
    match y {
        Yaml::Integer(i) => Some(*i),
        Yaml::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn items(y: &Yaml) -> &[Yaml] {
    y.as_vec().map(Vec::as_slice).unwrap_or(&[])
}

/// `host:port` → port (the part after the last colon).
fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {addr:?}"))
}

fn host_of(addr: &str) -> &str {
    addr.rsplit_once(':').map_or(addr, |(h, _)| h)
}

// ---- the binaries' --help ----------------------------------------------------------------

struct Help {
    envs: BTreeSet<String>,
    flags: BTreeSet<String>,
}

fn help(bin: &str) -> &'static Help {
    static HELPS: OnceLock<BTreeMap<String, Help>> = OnceLock::new();
    let all = HELPS.get_or_init(|| {
        binaries::BINARIES
            .iter()
            .map(|(b, _)| {
                let text = binaries::help(b);
                let envs = text
                    .match_indices("[env: ")
                    .map(|(i, m)| {
                        text[i + m.len()..]
                            .chars()
                            .take_while(|c| {
                                c.is_ascii_uppercase() || *c == '_' || c.is_ascii_digit()
                            })
                            .collect::<String>()
                    })
                    .collect();
                let flags = text
                    .split_whitespace()
                    .filter(|w| w.starts_with("--"))
                    .map(|w| {
                        w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                            .to_owned()
                    })
                    .collect();
                ((*b).to_owned(), Help { envs, flags })
            })
            .collect()
    });
    all.get(bin).unwrap_or_else(|| panic!("no binary {bin}"))
}

/// The voxgate binary an image runs, from its name (`.../voxgate/relay:tag` → `relay`).
fn binary_of_image(image: &str) -> Option<&'static str> {
    let name = image.rsplit('/').next()?.split(':').next()?;
    let owner_ok = image.contains("voxgate/");
    binaries::BINARIES
        .iter()
        .map(|(b, _)| *b)
        .find(|b| owner_ok && *b == name)
}

// ---- Kubernetes objects ------------------------------------------------------------------

struct K8sObject {
    file: PathBuf,
    doc: Yaml,
}

impl K8sObject {
    fn kind(&self) -> &str {
        self.doc["kind"].as_str().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.doc["metadata"]["name"].as_str().unwrap_or("")
    }
    fn what(&self) -> String {
        format!("{} {} ({})", self.kind(), self.name(), self.file.display())
    }
}

/// The base's objects (the overlay only patches them).
fn k8s_base() -> Vec<K8sObject> {
    let base = deploy_dir().join("k8s/base");
    let kust = &load(&base.join("kustomization.yaml"))[0];
    items(&kust["resources"])
        .iter()
        .filter_map(Yaml::as_str)
        .flat_map(|r| {
            let file = base.join(r);
            load(&file).into_iter().map(move |doc| K8sObject {
                file: file.clone(),
                doc,
            })
        })
        .collect()
}

/// A workload's container, with its env resolved to literal values where it has them.
struct Container {
    owner: String,
    workload: String,
    binary: Option<&'static str>,
    doc: Yaml,
    env: BTreeMap<String, Yaml>,
    pod_labels: Yaml,
    pod_annotations: Yaml,
    pod_spec: Yaml,
}

impl Container {
    fn value(&self, name: &str) -> Option<String> {
        self.env.get(name).and_then(|e| text(&e["value"]))
    }
    fn must(&self, name: &str) -> String {
        self.value(name)
            .unwrap_or_else(|| panic!("{}: {name} has no literal value", self.owner))
    }
    /// containerPort by name or number → (port, protocol).
    fn container_port(&self, port: &Yaml) -> Option<(u16, String)> {
        items(&self.doc["ports"]).iter().find_map(|p| {
            let matches = match port {
                Yaml::String(name) => p["name"].as_str() == Some(name),
                Yaml::Integer(n) => int(&p["containerPort"]) == Some(*n),
                _ => false,
            };
            matches.then(|| {
                (
                    int(&p["containerPort"]).expect("containerPort") as u16,
                    p["protocol"].as_str().unwrap_or("TCP").to_owned(),
                )
            })
        })
    }
    fn declared_ports(&self) -> BTreeSet<(u16, String)> {
        items(&self.doc["ports"])
            .iter()
            .map(|p| {
                (
                    int(&p["containerPort"]).expect("containerPort") as u16,
                    p["protocol"].as_str().unwrap_or("TCP").to_owned(),
                )
            })
            .collect()
    }
}

fn containers(objects: &[K8sObject]) -> Vec<Container> {
    let mut out = Vec::new();
    for o in objects {
        if !matches!(o.kind(), "Deployment" | "StatefulSet") {
            continue;
        }
        let template = &o.doc["spec"]["template"];
        for c in items(&template["spec"]["containers"]) {
            let image = c["image"].as_str().unwrap_or("");
            let env = items(&c["env"])
                .iter()
                .map(|e| (e["name"].as_str().expect("env name").to_owned(), e.clone()))
                .collect();
            out.push(Container {
                owner: format!(
                    "{} container {}",
                    o.what(),
                    c["name"].as_str().unwrap_or("?")
                ),
                workload: o.name().to_owned(),
                binary: binary_of_image(image),
                doc: c.clone(),
                env,
                pod_labels: template["metadata"]["labels"].clone(),
                pod_annotations: template["metadata"]["annotations"].clone(),
                pod_spec: template["spec"].clone(),
            });
        }
    }
    out
}

fn labels_match(selector: &Yaml, labels: &Yaml) -> bool {
    selector.as_hash().is_some_and(|sel| {
        !sel.is_empty()
            && sel
                .iter()
                .all(|(k, v)| labels[k.as_str().unwrap_or("")] == *v)
    })
}

// ---- what a binary listens on, from its settings ------------------------------------------

/// The ports (with protocol) a binary binds, given a lookup of its settings (env names).
fn listen_ports(bin: &str, get: &dyn Fn(&str) -> Option<String>) -> BTreeSet<(u16, String)> {
    let tcp = |v: &str| (port_of(v), "TCP".to_owned());
    let mut set = BTreeSet::new();
    let range = |base: u16, n: u16, set: &mut BTreeSet<(u16, String)>| {
        for i in 0..n {
            set.insert((base + i, "UDP".to_owned()));
        }
    };
    match bin {
        "transceiver" => {
            set.insert(tcp(
                &get("VOXGATE_SIGNAL_LISTEN").expect("VOXGATE_SIGNAL_LISTEN")
            ));
            set.insert(tcp(
                &get("VOXGATE_GRPC_LISTEN").expect("VOXGATE_GRPC_LISTEN")
            ));
            let loops: u16 = get("VOXGATE_LOOPS")
                .expect("VOXGATE_LOOPS must be set: the default depends on the machine")
                .parse()
                .expect("loops");
            let media = port_of(&get("VOXGATE_MEDIA_LISTEN").expect("media"));
            range(media, loops, &mut set);
            // Each loop's ICE-TCP listener: `same` (the default) is the loop's UDP port.
            let tcp_base = match get("VOXGATE_TCP_LISTEN").as_deref() {
                None | Some("same") => Some(media),
                Some("off") => None,
                Some(addr) => Some(port_of(addr)),
            };
            if let Some(base) = tcp_base {
                for i in 0..loops {
                    set.insert((base + i, "TCP".to_owned()));
                }
            }
        }
        "relay" => {
            let public = get("VOXGATE_RELAY_LISTEN").expect("listen");
            set.insert((port_of(&public), "UDP".into()));
            // The ICE-TCP listener defaults to the public IP:port.
            match get("VOXGATE_RELAY_TCP_LISTEN").as_deref() {
                Some("off") => {}
                addr => {
                    set.insert(tcp(addr.unwrap_or(&public)));
                }
            }
            // Its internal socket binds any free port unless told (nothing to declare then).
            if let Some(addr) = get("VOXGATE_RELAY_TCP_INTERNAL_LISTEN") {
                set.insert((port_of(&addr), "UDP".into()));
            }
            set.insert(tcp(&get("VOXGATE_RELAY_METRICS_LISTEN").expect("metrics")));
            let workers: u16 = get("VOXGATE_RELAY_WORKERS")
                .expect("VOXGATE_RELAY_WORKERS must be set: the default depends on the machine")
                .parse()
                .expect("workers");
            range(
                port_of(&get("VOXGATE_RELAY_INTERNAL_LISTEN").expect("internal")),
                workers,
                &mut set,
            );
        }
        _ => {}
    }
    set
}

// ---- Dockerfiles ----------------------------------------------------------------------------

struct Dockerfile {
    path: PathBuf,
    binary: &'static str,
    /// (instruction, arguments) with continuations joined; comments dropped.
    instructions: Vec<(String, String)>,
}

impl Dockerfile {
    fn all(&self, instr: &str) -> Vec<&str> {
        self.instructions
            .iter()
            .filter(|(i, _)| i == instr)
            .map(|(_, a)| a.as_str())
            .collect()
    }
    /// ENV of the final stage.
    fn env(&self) -> BTreeMap<String, String> {
        let last_from = self
            .instructions
            .iter()
            .rposition(|(i, _)| i == "FROM")
            .unwrap_or(0);
        let mut env = BTreeMap::new();
        for (i, args) in &self.instructions[last_from..] {
            if i == "ENV" {
                for kv in args.split_whitespace() {
                    let (k, v) = kv.split_once('=').expect("ENV k=v form");
                    env.insert(k.to_owned(), v.to_owned());
                }
            }
        }
        env
    }
    fn exposed(&self) -> BTreeSet<(u16, String)> {
        let mut set = BTreeSet::new();
        for args in self.all("EXPOSE") {
            for p in args.split_whitespace() {
                let (ports, proto) = p.split_once('/').unwrap_or((p, "tcp"));
                let (lo, hi) = ports.split_once('-').unwrap_or((ports, ports));
                for port in lo.parse::<u16>().expect("port")..=hi.parse::<u16>().expect("port") {
                    set.insert((port, proto.to_uppercase()));
                }
            }
        }
        set
    }
}

fn dockerfiles() -> Vec<Dockerfile> {
    binaries::BINARIES
        .iter()
        .map(|(bin, _)| {
            let path = deploy_dir().join(format!("docker/{bin}.Dockerfile"));
            let raw =
                fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut instructions = Vec::new();
            let mut current = String::new();
            for line in raw.lines() {
                let t = line.trim();
                if t.starts_with('#') || (t.is_empty() && current.is_empty()) {
                    continue;
                }
                if let Some(head) = t.strip_suffix('\\') {
                    current.push_str(head);
                    current.push(' ');
                    continue;
                }
                current.push_str(t);
                let (i, a) = current.split_once(' ').unwrap_or((&current, ""));
                instructions.push((i.to_uppercase(), a.trim().to_owned()));
                current.clear();
            }
            Dockerfile {
                path,
                binary: bin,
                instructions,
            }
        })
        .collect()
}

// ---- compose --------------------------------------------------------------------------------

struct ComposeService {
    name: String,
    binary: Option<&'static str>,
    doc: Yaml,
    env: BTreeMap<String, String>,
    ip: Option<String>,
}

fn compose() -> (Yaml, Vec<ComposeService>) {
    let doc = load(&deploy_dir().join("compose.yaml")).remove(0);
    let services = doc["services"]
        .as_hash()
        .expect("services")
        .iter()
        .map(|(k, s)| {
            let env = s["environment"]
                .as_hash()
                .map(|h| {
                    h.iter()
                        .map(|(k, v)| {
                            (
                                k.as_str().expect("env name").to_owned(),
                                text(v).unwrap_or_default(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            ComposeService {
                name: k.as_str().expect("service name").to_owned(),
                binary: s["image"].as_str().and_then(binary_of_image),
                doc: s.clone(),
                env,
                ip: s["networks"].as_hash().and_then(|n| {
                    n.values()
                        .find_map(|v| v["ipv4_address"].as_str().map(str::to_owned))
                }),
            }
        })
        .collect();
    (doc, services)
}

// ---- the tests -------------------------------------------------------------------------------

#[test]
fn every_yaml_file_parses_and_every_k8s_object_is_well_formed() {
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    assert!(
        files.len() >= 8,
        "only {} YAML files under deploy/",
        files.len()
    );
    let mut objects = 0;
    for f in &files {
        let docs = load(f);
        assert!(!docs.is_empty(), "{} is empty", f.display());
        let under_k8s = f.components().any(|c| c.as_os_str() == "k8s");
        let is_kustomization = f.file_name() == Some("kustomization.yaml".as_ref());
        let is_helm_values = f
            .components()
            .any(|c| c.as_os_str() == "prometheus-adapter");
        if under_k8s && !is_kustomization && !is_helm_values {
            for d in &docs {
                for key in ["apiVersion", "kind"] {
                    assert!(
                        d[key].as_str().is_some(),
                        "{}: object without {key}",
                        f.display()
                    );
                }
                assert!(
                    d["metadata"]["name"].as_str().is_some(),
                    "{}: object without metadata.name",
                    f.display()
                );
                objects += 1;
            }
        }
    }
    assert!(objects >= 15, "only {objects} Kubernetes objects");
}

#[test]
fn kustomizations_reference_existing_files_and_list_every_manifest() {
    let k8s = deploy_dir().join("k8s");
    let mut kustomizations = Vec::new();
    let mut files = Vec::new();
    yaml_files(&k8s, &mut files);
    for f in &files {
        if f.file_name() == Some("kustomization.yaml".as_ref()) {
            kustomizations.push(f.clone());
        }
    }
    assert!(kustomizations.len() >= 2, "base and at least one overlay");
    for k in &kustomizations {
        let dir = k.parent().expect("dir");
        let doc = &load(k)[0];
        let mut listed = BTreeSet::new();
        for r in items(&doc["resources"]).iter().filter_map(Yaml::as_str) {
            let p = dir.join(r);
            assert!(
                p.is_file() || p.join("kustomization.yaml").is_file(),
                "{}: resource {r} does not exist",
                k.display()
            );
            listed.insert(r.to_owned());
        }
        for p in items(&doc["patches"]) {
            if let Some(path) = p["path"].as_str() {
                assert!(
                    dir.join(path).is_file(),
                    "{}: patch {path} missing",
                    k.display()
                );
                listed.insert(path.to_owned());
            }
        }
        // No manifest beside a kustomization is silently left out of it.
        for entry in fs::read_dir(dir).expect("dir").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && name != "kustomization.yaml" {
                assert!(
                    listed.contains(&name),
                    "{}: {name} is not listed",
                    k.display()
                );
            }
        }
    }

    // Render with the real kustomize where it is installed (kubectl embeds it).
    let overlay = k8s.join("overlays/example-region");
    match Command::new("kubectl")
        .arg("kustomize")
        .arg(&overlay)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "kubectl kustomize {} failed: {}",
                overlay.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let rendered = YamlLoader::load_from_str(&String::from_utf8_lossy(&out.stdout))
                .expect("rendered YAML parses");
            let kinds: BTreeSet<&str> =
                rendered.iter().filter_map(|d| d["kind"].as_str()).collect();
            for kind in [
                "Deployment",
                "StatefulSet",
                "Service",
                "PodDisruptionBudget",
                "HorizontalPodAutoscaler",
                "ConfigMap",
                "NetworkPolicy",
                "Ingress",
                "Namespace",
            ] {
                assert!(kinds.contains(kind), "rendered overlay has no {kind}");
            }
            for d in &rendered {
                if d["kind"].as_str() != Some("Namespace") {
                    assert_eq!(
                        d["metadata"]["namespace"].as_str(),
                        Some("voxgate-example"),
                        "{:?} not in the overlay's namespace",
                        d["metadata"]["name"]
                    );
                }
            }
        }
        Err(_) => eprintln!("kubectl not installed: rendering with kustomize skipped"),
    }
}

#[test]
fn manifests_compose_dockerfiles_and_readme_name_only_real_settings() {
    let mut checked = 0;
    let mut check = |bin: &str, what: &str, env: &str| {
        if env.starts_with("VOXGATE_") {
            assert!(
                help(bin).envs.contains(env),
                "{what}: {env} is not an environment variable of `{bin} --help`"
            );
            checked += 1;
        }
    };
    let flag_check = |bin: &str, what: &str, args: &Yaml| {
        for a in items(args).iter().filter_map(text) {
            if let Some(flag) = a.strip_prefix("--") {
                let flag = format!("--{}", flag.split('=').next().unwrap_or(flag));
                assert!(
                    help(bin).flags.contains(&flag),
                    "{what}: {bin} has no {flag}"
                );
            }
        }
    };

    for c in containers(&k8s_base()) {
        let Some(bin) = c.binary else { continue };
        for name in c.env.keys() {
            check(bin, &c.owner, name);
        }
        flag_check(bin, &c.owner, &c.doc["args"]);
        flag_check(bin, &c.owner, &c.doc["command"]);
        // `$(VAR)` in a value must name a variable defined earlier in the list.
        for (name, e) in &c.env {
            if let Some(v) = text(&e["value"]) {
                if let Some(start) = v.find("$(") {
                    let var = &v[start + 2..v[start..].find(')').map_or(v.len(), |i| start + i)];
                    let defined = items(&c.doc["env"])
                        .iter()
                        .take_while(|x| x["name"].as_str() != Some(name))
                        .any(|x| x["name"].as_str() == Some(var));
                    assert!(
                        defined,
                        "{}: {name} uses $({var}) before it is defined",
                        c.owner
                    );
                }
            }
        }
    }

    let (_, services) = compose();
    for s in &services {
        let Some(bin) = s.binary else { continue };
        let what = format!("compose service {}", s.name);
        for name in s.env.keys() {
            check(bin, &what, name);
        }
        flag_check(bin, &what, &s.doc["command"]);
        let dockerfile = s.doc["build"]["dockerfile"]
            .as_str()
            .expect("build.dockerfile");
        assert!(
            binaries::workspace_root().join(dockerfile).is_file(),
            "{what}: {dockerfile} missing"
        );
        assert!(
            dockerfile.ends_with(&format!("/{bin}.Dockerfile")),
            "{what} builds {dockerfile} for image of {bin}"
        );
    }

    for d in dockerfiles() {
        let what = d.path.display().to_string();
        for name in d.env().keys() {
            check(d.binary, &what, name);
        }
    }

    // The README may mention any binary's variables.
    let readme = fs::read_to_string(deploy_dir().join("README.md")).expect("deploy/README.md");
    let mut mentioned = BTreeSet::new();
    for (i, _) in readme.match_indices("VOXGATE_") {
        let name: String = readme[i..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        mentioned.insert(name);
    }
    // Variables of the compose file's own interpolation, not of a binary.
    let compose_vars = ["VOXGATE_SIGNAL_TOKEN", "VOXGATE_PUBLIC_IP"];
    for name in mentioned {
        if compose_vars.contains(&name.as_str()) || name.ends_with('_') {
            continue;
        }
        assert!(
            binaries::BINARIES
                .iter()
                .any(|(b, _)| help(b).envs.contains(&name)),
            "deploy/README.md names {name}, which no binary reads"
        );
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} settings checked");
}

#[test]
fn ports_agree_across_settings_containers_services_probes_and_policies() {
    let objects = k8s_base();
    let cs = containers(&objects);
    let by_name = |n: &str| -> &Container {
        cs.iter()
            .find(|c| c.workload == n)
            .unwrap_or_else(|| panic!("no workload {n}"))
    };
    let find = |kind: &str, name: &str| -> &K8sObject {
        objects
            .iter()
            .find(|o| o.kind() == kind && o.name() == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };

    // Container ports are exactly what the listen settings bind.
    for c in &cs {
        let Some(bin) = c.binary else { continue };
        let expected = listen_ports(bin, &|n| c.value(n));
        assert_eq!(
            c.declared_ports(),
            expected,
            "{}: containerPorts vs settings",
            c.owner
        );
    }

    // Probes hit the right endpoint on a TCP container port; Prometheus annotations agree.
    let tx = by_name("transceiver");
    let relay = by_name("relay");
    let signal_port = port_of(&tx.must("VOXGATE_SIGNAL_LISTEN"));
    let grpc_port = port_of(&tx.must("VOXGATE_GRPC_LISTEN"));
    let metrics_port = port_of(&relay.must("VOXGATE_RELAY_METRICS_LISTEN"));
    let public_port = port_of(&relay.must("VOXGATE_RELAY_LISTEN"));
    for (c, probe, path, port) in [
        (tx, "readinessProbe", "/readyz", signal_port),
        (tx, "livenessProbe", "/healthz", signal_port),
        (relay, "readinessProbe", "/metrics", metrics_port),
        (relay, "livenessProbe", "/metrics", metrics_port),
    ] {
        let g = &c.doc[probe]["httpGet"];
        assert_eq!(g["path"].as_str(), Some(path), "{} {probe} path", c.owner);
        assert_eq!(
            c.container_port(&g["port"]),
            Some((port, "TCP".to_owned())),
            "{} {probe} port",
            c.owner
        );
    }
    for (c, port) in [(tx, signal_port), (relay, metrics_port)] {
        assert_eq!(
            text(&c.pod_annotations["prometheus.io/port"]),
            Some(port.to_string()),
            "{}: prometheus.io/port",
            c.owner
        );
    }

    // Every Service selects a workload and targets its ports with the right protocol.
    for s in objects.iter().filter(|o| o.kind() == "Service") {
        let selector = &s.doc["spec"]["selector"];
        let targets: Vec<&Container> = cs
            .iter()
            .filter(|c| labels_match(selector, &c.pod_labels))
            .collect();
        assert!(!targets.is_empty(), "{} selects no pods", s.what());
        for p in items(&s.doc["spec"]["ports"]) {
            let target = if p["targetPort"].is_badvalue() {
                &p["port"]
            } else {
                &p["targetPort"]
            };
            let proto = p["protocol"].as_str().unwrap_or("TCP");
            for c in &targets {
                let found = c.container_port(target);
                assert!(
                    found.as_ref().is_some_and(|(_, pr)| pr == proto),
                    "{}: targetPort {target:?}/{proto} is not a port of {}",
                    s.what(),
                    c.owner
                );
            }
        }
    }

    // The VIP: the relay Service's port is the relay's public port and the advertised port.
    let relay_svc = find("Service", "relay");
    assert_eq!(relay_svc.doc["spec"]["type"].as_str(), Some("LoadBalancer"));
    assert_eq!(
        relay_svc.doc["spec"]["externalTrafficPolicy"].as_str(),
        Some("Local")
    );
    // One port per region VIP, UDP and TCP (ICE over TCP on the relay's public IP:port).
    let svc_ports: BTreeSet<(u16, String)> = items(&relay_svc.doc["spec"]["ports"])
        .iter()
        .map(|p| {
            let port = int(&p["port"]).expect("port") as u16;
            (port, p["protocol"].as_str().unwrap_or("TCP").to_owned())
        })
        .collect();
    assert_eq!(
        svc_ports,
        BTreeSet::from([
            (public_port, "TCP".to_owned()),
            (public_port, "UDP".to_owned())
        ]),
        "relay Service ports vs VOXGATE_RELAY_LISTEN (UDP and TCP)"
    );
    let vip_port = public_port;
    for k in [
        "k8s/base/kustomization.yaml",
        "k8s/overlays/example-region/kustomization.yaml",
    ] {
        let doc = &load(&deploy_dir().join(k))[0];
        for g in items(&doc["configMapGenerator"]) {
            for lit in items(&g["literals"]).iter().filter_map(Yaml::as_str) {
                if let Some(addr) = lit.strip_prefix("advertise=") {
                    for a in addr.split(',') {
                        assert_eq!(port_of(a), vip_port, "{k}: advertise {a} vs the VIP port");
                    }
                }
            }
        }
    }
    assert!(
        matches!(
            tx.env["VOXGATE_ADVERTISE"]["valueFrom"]["configMapKeyRef"]["key"].as_str(),
            Some("advertise")
        ),
        "transceivers must advertise the region's VIP"
    );
    assert_eq!(tx.must("VOXGATE_INTERNAL_IP"), "$(POD_IP)");
    assert_eq!(
        tx.env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("status.podIP")
    );
    assert!(relay
        .must("VOXGATE_RELAY_INTERNAL_LISTEN")
        .starts_with("$(POD_IP):"));

    // Relays find Redis through its Service.
    let redis_url = relay.must("VOXGATE_RELAY_REDIS");
    let redis_addr = redis_url.strip_prefix("redis://").expect("redis:// URL");
    let redis_svc = find("Service", host_of(redis_addr));
    assert!(
        items(&redis_svc.doc["spec"]["ports"])
            .iter()
            .any(|p| int(&p["port"]) == Some(i64::from(port_of(redis_addr)))),
        "Redis Service has no port {}",
        port_of(redis_addr)
    );

    // Backends reach each transceiver pod's gRPC port by its StatefulSet DNS name, for every
    // replica the HPA may create.
    let sts = find("StatefulSet", "transceiver");
    let headless_name = sts.doc["spec"]["serviceName"]
        .as_str()
        .expect("serviceName");
    let headless = find("Service", headless_name);
    assert_eq!(headless.doc["spec"]["clusterIP"].as_str(), Some("None"));
    let hpa = find("HorizontalPodAutoscaler", "transceiver");
    assert_eq!(
        hpa.doc["spec"]["scaleTargetRef"]["kind"].as_str(),
        Some("StatefulSet")
    );
    assert_eq!(
        hpa.doc["spec"]["scaleTargetRef"]["name"].as_str(),
        Some(sts.name())
    );
    let max = int(&hpa.doc["spec"]["maxReplicas"]).expect("maxReplicas");
    let bot = by_name("echo-bot");
    let urls = bot.must("VOXGATE_ECHO_TRANSCEIVER");
    let urls: Vec<&str> = urls.split(',').map(str::trim).collect();
    assert_eq!(
        urls.len() as i64,
        max,
        "echo-bot should list every possible transceiver pod"
    );
    for (i, u) in urls.iter().enumerate() {
        assert_eq!(
            *u,
            format!("http://{}-{i}.{headless_name}:{grpc_port}", sts.name()),
            "echo-bot transceiver {i}"
        );
    }

    // Network policies open exactly the workloads' ports.
    let np = find("NetworkPolicy", "transceiver");
    let media: BTreeSet<u16> = tx
        .declared_ports()
        .iter()
        .filter(|(_, p)| p == "UDP")
        .map(|(n, _)| *n)
        .collect();
    let rules = items(&np.doc["spec"]["ingress"]);
    let opened = |rules: &[Yaml], proto: &str| -> BTreeSet<u16> {
        let mut set = BTreeSet::new();
        for r in rules {
            for p in items(&r["ports"]) {
                if p["protocol"].as_str() == Some(proto) {
                    let lo = int(&p["port"]).expect("port") as u16;
                    let hi = int(&p["endPort"]).map_or(lo, |h| h as u16);
                    set.extend(lo..=hi);
                }
            }
        }
        set
    };
    assert_eq!(
        opened(rules, "UDP"),
        media,
        "transceiver policy vs media ports"
    );
    assert_eq!(
        opened(rules, "TCP"),
        BTreeSet::from([signal_port, grpc_port]),
        "transceiver policy vs TCP ports"
    );
    let rp = find("NetworkPolicy", "relay");
    let relay_udp: BTreeSet<u16> = relay
        .declared_ports()
        .iter()
        .filter(|(_, p)| p == "UDP")
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(opened(items(&rp.doc["spec"]["ingress"]), "UDP"), relay_udp);
    assert_eq!(
        opened(items(&rp.doc["spec"]["ingress"]), "TCP"),
        BTreeSet::from([metrics_port, public_port])
    );

    // PDBs select a workload.
    for p in objects.iter().filter(|o| o.kind() == "PodDisruptionBudget") {
        let sel = &p.doc["spec"]["selector"]["matchLabels"];
        assert!(
            cs.iter().any(|c| labels_match(sel, &c.pod_labels)),
            "{} selects nothing",
            p.what()
        );
    }

    // Dockerfiles: EXPOSE is what the image's default settings bind; the health check reads
    // one of them.
    for d in dockerfiles() {
        let env = d.env();
        let expected = listen_ports(d.binary, &|n| env.get(n).cloned());
        assert_eq!(d.exposed(), expected, "{}: EXPOSE vs ENV", d.path.display());
        // The k8s container declares the same ports as the image exposes.
        if let Some(c) = cs.iter().find(|c| c.binary == Some(d.binary)) {
            assert_eq!(
                c.declared_ports(),
                expected,
                "{} vs {}",
                c.owner,
                d.path.display()
            );
        }
    }

    // Compose: published container ports are bound ones; addresses point at the services.
    let (_, services) = compose();
    let svc = |n: &str| {
        services
            .iter()
            .find(|s| s.name == n)
            .unwrap_or_else(|| panic!("compose {n}"))
    };
    let relay_c = svc("relay");
    let relay_bound = listen_ports("relay", &|n| relay_c.env.get(n).cloned());
    let mut published_vip = None;
    for s in &services {
        let Some(bin) = s.binary else { continue };
        let bound = listen_ports(bin, &|n| s.env.get(n).cloned());
        for p in items(&s.doc["ports"]).iter().filter_map(text) {
            let (spec, proto) = p.split_once('/').unwrap_or((&p, "tcp"));
            let parts: Vec<&str> = spec.split(':').collect();
            let container: u16 = parts[parts.len() - 1].parse().expect("container port");
            let host: u16 = parts[parts.len() - 2].parse().expect("host port");
            assert!(
                bound.contains(&(container, proto.to_uppercase())),
                "compose {}: publishes {p}, which it does not bind",
                s.name
            );
            if s.name == "relay" && proto == "udp" {
                published_vip = Some(host);
            }
        }
        if bin == "transceiver" {
            assert_eq!(
                s.env.get("VOXGATE_INTERNAL_IP"),
                s.ip.as_ref(),
                "compose {}: internal IP",
                s.name
            );
            let adv = &s.env["VOXGATE_ADVERTISE"];
            assert_eq!(
                Some(port_of(adv)),
                published_vip,
                "compose {}: advertise vs relay's published port",
                s.name
            );
            let allowed = &relay_c.env["VOXGATE_RELAY_TRANSCEIVERS"];
            let ip = s.ip.as_deref().expect("static ip");
            assert!(
                allowed.contains(&format!("{ip}/")),
                "relay does not allow {} ({ip})",
                s.name
            );
        }
    }
    assert!(relay_bound.contains(&(public_port, "UDP".to_owned())));
    assert_eq!(
        host_of(&relay_c.env["VOXGATE_RELAY_INTERNAL_LISTEN"]),
        relay_c.ip.as_deref().expect("relay ip")
    );
    let redis = svc("redis");
    assert_eq!(
        relay_c.env["VOXGATE_RELAY_REDIS"],
        format!("redis://{}:6379", redis.ip.as_deref().expect("redis ip"))
    );
    let tx_grpc: BTreeSet<String> = services
        .iter()
        .filter(|s| s.binary == Some("transceiver"))
        .map(|s| {
            format!(
                "http://{}:{}",
                s.ip.as_deref().expect("ip"),
                port_of(&s.env["VOXGATE_GRPC_LISTEN"])
            )
        })
        .collect();
    let bot_urls: BTreeSet<String> = svc("echo-bot").env["VOXGATE_ECHO_TRANSCEIVER"]
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect();
    assert_eq!(bot_urls, tx_grpc, "compose echo-bot vs transceivers' gRPC");
}

#[test]
fn drain_and_stop_timeouts_nest() {
    let objects = k8s_base();
    let cs = containers(&objects);
    let tx = cs
        .iter()
        .find(|c| c.binary == Some("transceiver"))
        .expect("transceiver");
    let drain: i64 = tx
        .must("VOXGATE_DRAIN_TIMEOUT_SECS")
        .parse()
        .expect("drain");
    let grace = int(&tx.pod_spec["terminationGracePeriodSeconds"]).expect("grace period");
    assert!(drain > 0, "transceivers must drain");
    assert!(
        grace > drain,
        "terminationGracePeriodSeconds {grace} <= drain timeout {drain}"
    );

    let relay = cs
        .iter()
        .find(|c| c.binary == Some("relay"))
        .expect("relay");
    let pre_stop = items(&relay.doc["lifecycle"]["preStop"]["exec"]["command"])
        .iter()
        .filter_map(text)
        .collect::<Vec<_>>();
    assert_eq!(
        pre_stop.first().map(String::as_str),
        Some("sleep"),
        "relay preStop"
    );
    let sleep: i64 = pre_stop[1].parse().expect("sleep seconds");
    let relay_grace = int(&relay.pod_spec["terminationGracePeriodSeconds"]).expect("relay grace");
    assert!(
        sleep >= 5 && relay_grace > sleep,
        "relay preStop {sleep}s, grace {relay_grace}s"
    );

    let (_, services) = compose();
    for s in services.iter().filter(|s| s.binary == Some("transceiver")) {
        let drain: u64 = s.env["VOXGATE_DRAIN_TIMEOUT_SECS"].parse().expect("drain");
        let stop = s.doc["stop_grace_period"]
            .as_str()
            .expect("stop_grace_period");
        let stop: u64 = stop.trim_end_matches('s').parse().expect("seconds");
        assert!(
            stop > drain,
            "compose {}: stop_grace_period {stop}s <= drain {drain}s",
            s.name
        );
    }
}

#[test]
fn secrets_come_from_secret_objects_and_files_never_literals() {
    let objects = k8s_base();
    let secret_names: BTreeSet<&str> = ["voxgate-fleet-key", "voxgate-tokens"].into();
    for c in containers(&objects) {
        let mounts: BTreeMap<String, String> = items(&c.doc["volumeMounts"])
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().expect("name").to_owned(),
                    m["mountPath"].as_str().expect("path").to_owned(),
                )
            })
            .collect();
        for (name, e) in &c.env {
            let is_secret = (name.contains("TOKEN") || name.contains("FLEET_KEY"))
                && !name.ends_with("_FILE")
                && !name.ends_with("_ID");
            if is_secret {
                let r = e["valueFrom"]["secretKeyRef"]["name"].as_str();
                assert!(
                    r.is_some_and(|r| secret_names.contains(r)),
                    "{}: {name} must come from a secretKeyRef",
                    c.owner
                );
            }
            if name.ends_with("FLEET_KEY_FILE") {
                let path = c.must(name);
                let (dir, _) = path.rsplit_once('/').expect("path");
                let volume = mounts
                    .iter()
                    .find(|(_, p)| p.as_str() == dir)
                    .map(|(v, _)| v.clone())
                    .unwrap_or_else(|| panic!("{}: {path} is not on a mounted volume", c.owner));
                let vol = items(&c.pod_spec["volumes"])
                    .iter()
                    .find(|v| v["name"].as_str() == Some(volume.as_str()))
                    .expect("volume")
                    .clone();
                assert_eq!(
                    vol["secret"]["secretName"].as_str(),
                    Some("voxgate-fleet-key")
                );
            }
        }
        // Non-root, no privilege escalation.
        let sc = &c.pod_spec["securityContext"];
        assert_eq!(
            sc["runAsNonRoot"].as_bool(),
            Some(true),
            "{}: runAsNonRoot",
            c.owner
        );
        assert!(
            int(&sc["runAsUser"]).is_some_and(|u| u > 0),
            "{}: runAsUser",
            c.owner
        );
        assert_eq!(
            c.doc["securityContext"]["allowPrivilegeEscalation"].as_bool(),
            Some(false),
            "{}",
            c.owner
        );
    }

    let (_, services) = compose();
    for s in &services {
        for (name, v) in &s.env {
            if name.contains("TOKEN") {
                assert!(
                    v.starts_with("${"),
                    "compose {}: {name} must be interpolated, not written in",
                    s.name
                );
            }
        }
    }

    // No 64-hex-character string (a fleet key) anywhere under deploy/.
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    files.extend(dockerfiles().into_iter().map(|d| d.path));
    files.push(deploy_dir().join("README.md"));
    for f in files {
        let body = fs::read_to_string(&f).expect("read");
        let mut run = 0;
        for c in body.chars() {
            run = if c.is_ascii_hexdigit() { run + 1 } else { 0 };
            assert!(run < 64, "{} holds what looks like a key", f.display());
        }
    }
}

#[test]
fn dockerfiles_build_small_non_root_images_with_health_checks() {
    let packages: BTreeMap<&str, &str> = binaries::BINARIES.into_iter().collect();
    for d in dockerfiles() {
        let what = d.path.display().to_string();
        let froms = d.all("FROM");
        assert_eq!(froms.len(), 2, "{what}: two stages");
        assert_eq!(froms[0], "rust:1-bookworm AS build", "{what}: builder");
        assert_eq!(froms[1], "debian:bookworm-slim", "{what}: runtime");
        let run = d.all("RUN").join("\n");
        let build = format!(
            "cargo build --release --locked -p {} --bin {}",
            packages[d.binary], d.binary
        );
        assert!(run.contains(&build), "{what}: does not run `{build}`");
        if d.binary == "transceiver" {
            assert!(run.contains("cmake"), "{what}: libopus needs cmake");
        }
        let user = d.all("USER");
        let uid: u32 = user
            .last()
            .and_then(|u| u.split(':').next()?.parse().ok())
            .expect("numeric USER");
        assert!(uid > 0, "{what}: runs as root");
        let entry = d.all("ENTRYPOINT");
        assert_eq!(
            entry,
            vec![format!("[\"/usr/local/bin/{}\"]", d.binary).as_str()],
            "{what}"
        );
        let hc = d.all("HEALTHCHECK");
        assert_eq!(hc.len(), 1, "{what}: HEALTHCHECK");
        assert!(
            hc[0].contains("voxgate-healthcheck"),
            "{what}: health check script"
        );
        if let Some(var) = hc[0].split('"').find(|w| w.starts_with("VOXGATE_")) {
            assert!(
                d.env().contains_key(var),
                "{what}: health check reads unset {var}"
            );
        }
        assert!(
            d.all("COPY")
                .iter()
                .any(|c| c.contains("deploy/docker/healthcheck.sh")),
            "{what}: health check script not copied"
        );
    }

    let ignore = fs::read_to_string(binaries::workspace_root().join(".dockerignore"))
        .expect(".dockerignore");
    let patterns: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for must in ["target/", ".git/", "deploy/secrets/"] {
        assert!(
            patterns.contains(&must),
            ".dockerignore must exclude {must}"
        );
    }
    for needed in [
        "Cargo.lock",
        "deploy",
        "deploy/docker",
        "proto",
        "transceiver",
        "relay",
        "echo-bot",
    ] {
        assert!(
            !patterns.iter().any(|p| p.trim_end_matches('/') == needed),
            ".dockerignore excludes {needed}, which the build needs"
        );
    }
}

// ---- running the binaries -------------------------------------------------------------------

// Below the ephemeral range and claimed across test processes: see voxgate_testkit::ports.
use voxgate_testkit::ports::{free_tcp_port as free_port, free_udp_and_tcp_port as free_udp_port};

fn healthcheck(args: &[&str], env: &[(&str, String)]) -> bool {
    let script = deploy_dir().join("docker/healthcheck.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(script).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run healthcheck.sh").status.success()
}

fn wait_healthy(args: &[&str], env: &[(&str, String)], p: &Proc) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !healthcheck(args, env) {
        assert!(Instant::now() < deadline, "never healthy\n{}", p.tail(20));
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn health_checks_and_the_autoscaling_metric_work_against_the_real_binaries() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("manifests");
    fs::create_dir_all(&dir).expect("dir");
    let key = "ab".repeat(32);

    // The transceiver, configured as the image does, on loopback.
    let signal = format!("0.0.0.0:{}", free_port());
    let tx = Proc::spawn(
        "transceiver",
        None,
        Command::new(binaries::path("transceiver"))
            .env("VOXGATE_SIGNAL_LISTEN", &signal)
            .env(
                "VOXGATE_MEDIA_LISTEN",
                format!("127.0.0.1:{}", free_udp_port()),
            )
            .env("VOXGATE_LOOPS", "1")
            .env("VOXGATE_NO_PIN", "true")
            .env("VOXGATE_GRPC_LISTEN", format!("127.0.0.1:{}", free_port()))
            // Signaling on a wildcard needs a token (fail closed), as in the manifests.
            .env("VOXGATE_TOKEN", "manifests-test-signal-token")
            // Stopped with SIGTERM on drop: exit at once rather than drain.
            .env("VOXGATE_DRAIN_TIMEOUT_SECS", "0")
            .env("VOXGATE_FLEET_KEY", &key),
        dir.join("transceiver.log"),
    )
    .expect("spawn transceiver");
    let env = [("VOXGATE_SIGNAL_LISTEN", signal.clone())];
    wait_healthy(&["http", "VOXGATE_SIGNAL_LISTEN", "/healthz"], &env, &tx);
    assert!(healthcheck(
        &["http", "VOXGATE_SIGNAL_LISTEN", "/readyz"],
        &env
    ));
    assert!(!healthcheck(
        &["http", "VOXGATE_SIGNAL_LISTEN", "/no-such-page"],
        &env
    ));
    assert!(!healthcheck(
        &["http", "VOXGATE_UNSET_FOR_THIS_TEST", "/healthz"],
        &[]
    ));

    // The HPA's metric (and the adapter's rule) name a series the transceiver exports.
    let mut body = String::new();
    {
        use std::io::{Read, Write};
        let mut s = TcpStream::connect(("127.0.0.1", port_of(&signal))).expect("connect");
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
            .expect("write");
        s.read_to_string(&mut body).expect("read");
    }
    let objects = k8s_base();
    let hpa = objects
        .iter()
        .find(|o| o.kind() == "HorizontalPodAutoscaler")
        .expect("HPA");
    let metric = hpa.doc["spec"]["metrics"][0]["pods"]["metric"]["name"]
        .as_str()
        .expect("pods metric");
    assert!(
        metrics_text::sum(&body, metric).is_some(),
        "the transceiver does not export {metric}:\n{body}"
    );
    let adapter = &load(&deploy_dir().join("k8s/prometheus-adapter/values.yaml"))[0];
    let rule = &adapter["rules"]["custom"][0];
    assert!(rule["seriesQuery"]
        .as_str()
        .expect("seriesQuery")
        .starts_with(&format!("{metric}{{")));
    assert_eq!(rule["name"]["as"].as_str(), Some(metric));

    // The relay's health check is its metrics endpoint.
    let metrics = format!("0.0.0.0:{}", free_port());
    let relay = Proc::spawn(
        "relay",
        None,
        Command::new(binaries::path("relay"))
            .env(
                "VOXGATE_RELAY_LISTEN",
                format!("127.0.0.1:{}", free_udp_port()),
            )
            .env("VOXGATE_RELAY_INTERNAL_LISTEN", "127.0.0.1:0")
            .env("VOXGATE_RELAY_WORKERS", "1")
            .env("VOXGATE_RELAY_METRICS_LISTEN", &metrics)
            .env("VOXGATE_RELAY_FLEET_KEY", &key),
        dir.join("relay.log"),
    )
    .expect("spawn relay");
    let env = [("VOXGATE_RELAY_METRICS_LISTEN", metrics)];
    wait_healthy(
        &["http", "VOXGATE_RELAY_METRICS_LISTEN", "/metrics"],
        &env,
        &relay,
    );

    // The echo-bot's: an established connection (here, one the test holds itself).
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("listen");
    let _client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let _server = listener.accept().expect("accept");
    assert!(healthcheck(&["connected"], &[]));
    assert!(!healthcheck(&["bogus"], &[]));
    drop(tx);
    drop(relay);
}
