//! A blocking client of the daemon's HTTP API, found through the run-file.

use std::path::PathBuf;
use std::time::Duration;

use reconcile_home::Home;
use reqwest::StatusCode;
use reqwest::blocking::{RequestBuilder, Response};
use serde::de::DeserializeOwned;

use crate::pool::{AcquireLease, LeaseView, OpenWindow, Released, WindowView};
use crate::runfile::{RunFileError, read_run_file};
use crate::wire::{CreateSession, ErrorBody, Health, ReportView, SessionView, StopDaemon};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no daemon is running for {home} ({reason})")]
    NoDaemon { home: PathBuf, reason: RunFileError },
    #[error("the daemon on port {port} does not answer: {source}")]
    Unreachable { port: u16, source: reqwest::Error },
    #[error("{}", body.message)]
    Api { status: u16, body: ErrorBody },
    #[error("the daemon answered {status} with a body this build does not understand")]
    Unexpected { status: u16 },
}

/// A client bound to one daemon's port and bearer token.
#[derive(Clone, Debug)]
pub struct Client {
    base: String,
    port: u16,
    token: String,
    http: reqwest::blocking::Client,
}

impl Client {
    pub fn new(port: u16, token: String) -> Client {
        Client::with_timeout(port, token, Duration::from_secs(120))
    }

    /// A client whose every request gives up after `timeout` (probes use a short one).
    pub fn with_timeout(port: u16, token: String, timeout: Duration) -> Client {
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(2).min(timeout))
            .timeout(timeout)
            .no_proxy()
            .build()
            .expect("a client without TLS or proxies always builds");
        Client {
            base: format!("http://127.0.0.1:{port}"),
            port,
            token,
            http,
        }
    }

    /// The daemon named by the run-file in `home`.
    pub fn from_home(home: &Home) -> Result<Client, ClientError> {
        let run = read_run_file(&home.run_file()).map_err(|reason| ClientError::NoDaemon {
            home: home.root().to_owned(),
            reason,
        })?;
        Ok(Client::new(run.port, run.token))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    fn get(&self, path: &str) -> RequestBuilder {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    fn post(&self, path: &str) -> RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    fn send(&self, request: RequestBuilder) -> Result<Response, ClientError> {
        let response = request.send().map_err(|source| ClientError::Unreachable {
            port: self.port,
            source,
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        match response.json::<ErrorBody>() {
            Ok(body) => Err(ClientError::Api {
                status: status.as_u16(),
                body,
            }),
            Err(_) => Err(ClientError::Unexpected {
                status: status.as_u16(),
            }),
        }
    }

    fn json<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, ClientError> {
        let response = self.send(request)?;
        let status = response.status().as_u16();
        response
            .json()
            .map_err(|_| ClientError::Unexpected { status })
    }

    pub fn health(&self) -> Result<Health, ClientError> {
        self.json(self.http.get(format!("{}/healthz", self.base)))
    }

    /// Whether the boot reconcile has finished.
    pub fn ready(&self) -> Result<bool, ClientError> {
        let response = self
            .http
            .get(format!("{}/readyz", self.base))
            .send()
            .map_err(|source| ClientError::Unreachable {
                port: self.port,
                source,
            })?;
        Ok(response.status() == StatusCode::OK)
    }

    pub fn sessions(&self) -> Result<Vec<SessionView>, ClientError> {
        self.json(self.get("/v1/sessions"))
    }

    pub fn session(&self, id: &str) -> Result<SessionView, ClientError> {
        self.json(self.get(&format!("/v1/sessions/{id}")))
    }

    pub fn create(&self, request: &CreateSession) -> Result<SessionView, ClientError> {
        self.json(self.post("/v1/sessions").json(request))
    }

    pub fn stop(&self, id: &str) -> Result<SessionView, ClientError> {
        self.json(self.post(&format!("/v1/sessions/{id}/stop")))
    }

    pub fn report(&self) -> Result<ReportView, ClientError> {
        self.json(self.get("/v1/report"))
    }

    pub fn windows(&self) -> Result<Vec<WindowView>, ClientError> {
        self.json(self.get("/v1/windows"))
    }

    pub fn window(&self, id: &str) -> Result<WindowView, ClientError> {
        self.json(self.get(&format!("/v1/windows/{id}")))
    }

    pub fn open_window(&self, request: &OpenWindow) -> Result<WindowView, ClientError> {
        self.json(self.post("/v1/windows").json(request))
    }

    pub fn close_window(&self, id: &str) -> Result<WindowView, ClientError> {
        self.json(self.post(&format!("/v1/windows/{id}/close")))
    }

    pub fn acquire_lease(
        &self,
        window: &str,
        request: &AcquireLease,
    ) -> Result<LeaseView, ClientError> {
        self.json(
            self.post(&format!("/v1/windows/{window}/leases"))
                .json(request),
        )
    }

    pub fn renew_lease(&self, id: &str) -> Result<LeaseView, ClientError> {
        self.json(self.post(&format!("/v1/leases/{id}/renew")))
    }

    pub fn release_lease(&self, id: &str) -> Result<Released, ClientError> {
        self.json(self.post(&format!("/v1/leases/{id}/release")))
    }

    pub fn stop_daemon(&self, stop_sessions: bool) -> Result<(), ClientError> {
        self.send(
            self.post("/v1/daemon/stop")
                .json(&StopDaemon { stop_sessions }),
        )?;
        Ok(())
    }
}
