//! A real Prometheus server for a test (Debian's `prometheus` package): its own config, rules
//! and data directory under a temp dir, listening on a free loopback port, scraping the given
//! targets every second, stopped on drop. Queried through its HTTP API (`/api/v1/query`,
//! `/api/v1/targets`, `/api/v1/rules`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::Proc;

/// One scrape job of the test's config.
pub struct Job<'a> {
    pub name: &'a str,
    pub targets: Vec<SocketAddr>,
}

/// Why a Prometheus server could not be started or queried.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("http: {0}")]
    Http(#[from] reqwest::Error),
    #[error("prometheus did not become ready:\n{0}")]
    NotReady(String),
    #[error("query {query:?} failed: {error}")]
    Query { query: String, error: String },
}

/// One series of an instant query's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// One rule as Prometheus evaluates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleState {
    pub name: String,
    pub health: String,
    pub last_error: String,
}

/// A running Prometheus.
pub struct Prometheus {
    proc: Proc,
    url: String,
    http: reqwest::blocking::Client,
}

impl Prometheus {
    /// Starts `prometheus` with `jobs` scraped every second and `rule_files` evaluated every
    /// second, its files in `dir` (created). Waits until `/-/ready` answers.
    pub fn start(
        dir: &Path,
        jobs: &[Job],
        rule_files: &[PathBuf],
    ) -> Result<Self, PrometheusError> {
        std::fs::create_dir_all(dir)?;
        let config = dir.join("prometheus.yml");
        std::fs::write(&config, config_text(jobs, rule_files))?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let listen = format!("127.0.0.1:{port}");
        let proc = Proc::spawn(
            "prometheus",
            None,
            Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address={listen}"))
                .arg("--log.level=warn"),
            dir.join("prometheus.log"),
        )?;
        let http = reqwest::blocking::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()?;
        let mut prom = Prometheus {
            proc,
            url: format!("http://{listen}"),
            http,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if !prom.proc.is_running() {
                break;
            }
            let ready = prom
                .http
                .get(format!("{}/-/ready", prom.url))
                .send()
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return Ok(prom);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(PrometheusError::NotReady(prom.proc.tail(40)))
    }

    /// The server's log, for failure messages.
    pub fn tail(&self, lines: usize) -> String {
        self.proc.tail(lines)
    }

    /// An instant query at the server's now. A scalar answer is one sample without labels.
    pub fn query(&self, expr: &str) -> Result<Vec<Sample>, PrometheusError> {
        let v: Value = self
            .http
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", expr)])
            .send()?
            .json()?;
        let fail = |error: String| PrometheusError::Query {
            query: expr.to_owned(),
            error,
        };
        if v["status"] != "success" {
            return Err(fail(
                v["error"].as_str().unwrap_or("no error text").to_owned(),
            ));
        }
        let data = &v["data"];
        match data["resultType"].as_str() {
            Some("vector") => Ok(data["result"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| Sample {
                    labels: s["metric"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect(),
                    value: sample_value(&s["value"]),
                })
                .collect()),
            Some("scalar") => Ok(vec![Sample {
                labels: BTreeMap::new(),
                value: sample_value(&data["result"]),
            }]),
            other => Err(fail(format!("unexpected result type {other:?}"))),
        }
    }

    /// Health of the scrape targets: `(job, health)` of each active target.
    pub fn targets(&self) -> Result<Vec<(String, String)>, PrometheusError> {
        let v: Value = self
            .http
            .get(format!("{}/api/v1/targets", self.url))
            .send()?
            .json()?;
        Ok(v["data"]["activeTargets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                (
                    t["labels"]["job"].as_str().unwrap_or_default().to_owned(),
                    t["health"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect())
    }

    /// Every loaded rule with its last evaluation's health.
    pub fn rules(&self) -> Result<Vec<RuleState>, PrometheusError> {
        let v: Value = self
            .http
            .get(format!("{}/api/v1/rules", self.url))
            .send()?
            .json()?;
        let mut out = Vec::new();
        for g in v["data"]["groups"].as_array().into_iter().flatten() {
            for r in g["rules"].as_array().into_iter().flatten() {
                out.push(RuleState {
                    name: r["name"].as_str().unwrap_or_default().to_owned(),
                    health: r["health"].as_str().unwrap_or_default().to_owned(),
                    last_error: r["lastError"].as_str().unwrap_or_default().to_owned(),
                });
            }
        }
        Ok(out)
    }
}

/// `[time, "value"]` of the API; NaN when it does not parse (Prometheus writes "NaN" itself).
fn sample_value(v: &Value) -> f64 {
    v[1].as_str()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(f64::NAN)
}

/// The config: 1 s scrape and evaluation intervals, one static job each.
pub fn config_text(jobs: &[Job], rule_files: &[PathBuf]) -> String {
    let mut s = String::from(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n",
    );
    if !rule_files.is_empty() {
        s.push_str("rule_files:\n");
        for f in rule_files {
            let _ = writeln!(s, "  - {:?}", f.display().to_string());
        }
    }
    s.push_str("scrape_configs:\n");
    for j in jobs {
        let targets: Vec<String> = j
            .targets
            .iter()
            .map(|t| format!("{:?}", t.to_string()))
            .collect();
        let _ = writeln!(
            s,
            "  - job_name: {:?}\n    static_configs:\n      - targets: [{}]",
            j.name,
            targets.join(", ")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_every_job_target_and_rule_file() {
        let text = config_text(
            &[Job {
                name: "voxgate-relay",
                targets: vec!["127.0.0.1:9478".parse().unwrap()],
            }],
            &[PathBuf::from("/x/alerts.yaml")],
        );
        assert!(text.contains("scrape_interval: 1s"), "{text}");
        assert!(text.contains("  - \"/x/alerts.yaml\"\n"), "{text}");
        assert!(text.contains("job_name: \"voxgate-relay\""), "{text}");
        assert!(text.contains("targets: [\"127.0.0.1:9478\"]"), "{text}");
    }
}
