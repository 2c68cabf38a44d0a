//! `selfrag-s3-server`: a real S3-compatible server for the tests of libraries on object
//! storage, started by them on a loopback port.
//!
//! The protocol (request parsing, SigV4 signatures, error replies) is the `s3s` crate's, the
//! server RustFS is built on, and the objects are files under a root folder through `s3s-fs`.
//! What this program adds is what a test of several writers needs from a store and `s3s-fs`
//! lacks: its conditional writes (`If-None-Match: *`, `If-Match`) check and then write, so two
//! racing puts can both succeed. Here every write that changes an object holds one lock, so a
//! check and its write are one step, as on S3, MinIO or R2.
//!
//! `--ignore-conditional-writes` makes it a store from before conditional writes (S3 until
//! 2024): the conditions are dropped and every put overwrites. Tests use it to show that such a
//! store is refused rather than used unsafely.
//!
//! On start it prints one line, `listening on http://HOST:PORT`, once it accepts connections.

use std::io::Write as _;
use std::path::PathBuf;

use clap::Parser;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Request, S3Response, S3Result};
use s3s_fs::FileSystem;
use tokio::net::TcpListener;

#[derive(Debug, Parser)]
#[command(about = "An S3-compatible server over a folder, for tests")]
struct Options {
    /// Address to listen on (a loopback address; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Access key every request must be signed with.
    #[arg(long)]
    access_key: String,
    /// Secret key every request must be signed with.
    #[arg(long)]
    secret_key: String,
    /// Buckets to create at start (folders under the root).
    #[arg(long = "bucket")]
    buckets: Vec<String>,
    /// Drop `If-None-Match` and `If-Match` from writes: a store without conditional writes.
    #[arg(long)]
    ignore_conditional_writes: bool,
    /// The folder the buckets live in.
    root: PathBuf,
}

/// `s3s-fs`'s files with every object-changing request taking one lock, and requests to a
/// bucket that does not exist answered `NoSuchBucket` as S3 does (`s3s-fs` makes the folder).
struct AtomicWrites {
    files: FileSystem,
    root: PathBuf,
    writes: tokio::sync::Mutex<()>,
    ignore_conditions: bool,
}

impl AtomicWrites {
    fn bucket_exists(&self, bucket: &str) -> S3Result<()> {
        let valid = !bucket.is_empty() && !bucket.contains(['/', '\\']) && bucket != "..";
        if valid && self.root.join(bucket).is_dir() {
            Ok(())
        } else {
            Err(s3s::s3_error!(NoSuchBucket))
        }
    }
}

#[async_trait::async_trait]
impl S3 for AtomicWrites {
    async fn put_object(
        &self,
        mut req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        self.bucket_exists(&req.input.bucket)?;
        if self.ignore_conditions {
            req.input.if_none_match = None;
            req.input.if_match = None;
        }
        let _write = self.writes.lock().await;
        self.files.put_object(req).await
    }

    async fn complete_multipart_upload(
        &self,
        mut req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        if self.ignore_conditions {
            req.input.if_none_match = None;
            req.input.if_match = None;
        }
        let _write = self.writes.lock().await;
        self.files.complete_multipart_upload(req).await
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let _write = self.writes.lock().await;
        self.files.copy_object(req).await
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let _write = self.writes.lock().await;
        self.files.delete_object(req).await
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let _write = self.writes.lock().await;
        self.files.delete_objects(req).await
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        self.bucket_exists(&req.input.bucket)?;
        self.files.get_object(req).await
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        self.bucket_exists(&req.input.bucket)?;
        self.files.head_object(req).await
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        self.bucket_exists(&req.input.bucket)?;
        self.files.list_objects(req).await
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.bucket_exists(&req.input.bucket)?;
        self.files.list_objects_v2(req).await
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.bucket_exists(&req.input.bucket)?;
        self.files.create_multipart_upload(req).await
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        self.files.upload_part(req).await
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        self.files.list_parts(req).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.files.abort_multipart_upload(req).await
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        self.files.create_bucket(req).await
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.files.head_bucket(req).await
    }

    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        self.files.list_buckets(req).await
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.files.get_bucket_location(req).await
    }
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let options = Options::parse();
    match serve(options) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "selfrag-s3-server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn serve(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    for bucket in &options.buckets {
        std::fs::create_dir_all(options.root.join(bucket))?;
    }
    let files = FileSystem::new(&options.root)
        .map_err(|e| format!("cannot serve {}: {e:?}", options.root.display()))?;
    let mut builder = S3ServiceBuilder::new(AtomicWrites {
        files,
        root: options.root.clone(),
        writes: tokio::sync::Mutex::new(()),
        ignore_conditions: options.ignore_conditional_writes,
    });
    builder.set_auth(SimpleAuth::from_single(
        options.access_key,
        options.secret_key,
    ));
    let service = builder.build();

    let listener = TcpListener::bind(options.listen).await?;
    let address = listener.local_addr()?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{address}")?;
        out.flush()?;
    }
    let connections = ConnBuilder::new(TokioExecutor::new());
    let mut stop = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection");
                    continue;
                }
            },
            _ = stop.as_mut() => return Ok(()),
        };
        let connection = connections
            .serve_connection(TokioIo::new(socket), service.clone())
            .into_owned();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
}
