/* egress_ca.c - the worker's certificate authority for the egress cache
 * over https (egress_ca.h): the CA's key and certificate, a leaf per host,
 * the contexts of both ends of an intercepted tunnel. */
#include "egress_ca.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "../common/policy.h"

#define CA_DAYS	       3650
#define CA_RENEW_DAYS  30  /* a CA ending sooner than this is made again */
#define LEAF_DAYS      7   /* a leaf's life; made again past half of it */
#define LEAVES_MAX     256 /* hosts whose leaf is kept; then the oldest goes */
#define UPSTREAM_CTXES 16  /* client contexts kept, one per egress.ca_file */

static struct {
	bool open;
	EVP_PKEY *key, *leaf_key; /* the CA's; every leaf's (one key, many names) */
	X509 *cert;
	SSL_CTX *server;
	char file[PATH_MAX];
	struct leaf {
		char host[256];
		X509 *cert;
		time_t made;
	} leaves[LEAVES_MAX];
	unsigned next_leaf;
	struct upstream {
		char *ca_file; /* "" for none */
		SSL_CTX *ctx;
	} up[UPSTREAM_CTXES];
} G;

static int ssl_fail(struct al_err *err, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256];

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return al_err_set(err, AL_ESYS, "egress ca: %s: %s", what, e ? buf : "failed");
}

static bool set_serial(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn;
	bool ok;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return false;
	b[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(b, sizeof(b), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
	BN_free(bn);
	return ok;
}

/* One v3 extension by its config text, issuer as the signer. */
static bool add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v;
	X509_EXTENSION *ext;
	bool ok;

	X509V3_set_ctx_nodb(&v);
	X509V3_set_ctx(&v, issuer, x, NULL, NULL, 0);
	if (!(ext = X509V3_EXT_conf_nid(NULL, &v, nid, value)))
		return false;
	ok = X509_add_ext(x, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

/* A certificate for key named cn, valid from an hour ago for days, issued
 * by issuer (NULL: itself), not yet signed. The caller frees it. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, long days, X509 *issuer)
{
	X509 *x = X509_new();
	X509_NAME *name;

	if (!x || !X509_set_version(x, 2) || !set_serial(x) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), days * 86400) || !X509_set_pubkey(x, key) ||
	    !(name = X509_get_subject_name(x)) ||
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"Airlock",
					-1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
					-1, 0) ||
	    !X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) ||
	    !add_ext(x, issuer ? issuer : x, NID_subject_key_identifier, "hash") ||
	    !add_ext(x, issuer ? issuer : x, NID_authority_key_identifier, "keyid:always")) {
		X509_free(x);
		return NULL;
	}
	return x;
}

static bool sign(X509 *x, EVP_PKEY *key)
{
	return X509_sign(x, key, EVP_sha256()) > 0;
}

static int write_pem(const char *path, bool key_file, struct al_err *err)
{
	char tmp[PATH_MAX + 8];
	int fd;
	FILE *f;
	bool ok;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, key_file ? 0600 : 0644)) < 0 ||
	    !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return al_err_sys(err, "egress ca: %s", tmp);
	}
	ok = key_file ? PEM_write_PrivateKey(f, G.key, NULL, NULL, 0, NULL, NULL) == 1
		      : PEM_write_X509(f, G.cert) == 1;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path)) {
		unlink(tmp);
		return al_err_sys(err, "egress ca: writing %s", path);
	}
	return AL_OK;
}

/* The CA from dir's two files, if both are there, match and last. */
static bool load(const char *keyfile)
{
	FILE *k = fopen(keyfile, "re"), *c = fopen(G.file, "re");
	time_t soon = time(NULL) + (time_t)CA_RENEW_DAYS * 86400;

	if (k)
		G.key = PEM_read_PrivateKey(k, NULL, NULL, NULL);
	if (c)
		G.cert = PEM_read_X509(c, NULL, NULL, NULL);
	if (k)
		fclose(k);
	if (c)
		fclose(c);
	if (G.key && G.cert && X509_check_private_key(G.cert, G.key) == 1 &&
	    X509_cmp_time(X509_get0_notAfter(G.cert), &soon) > 0)
		return true;
	EVP_PKEY_free(G.key);
	X509_free(G.cert);
	G.key = NULL;
	G.cert = NULL;
	ERR_clear_error();
	return false;
}

/* dir and the folders above it, 0700 where made. */
static int mkdir_all(const char *dir)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0700) && errno != EEXIST)
				return AL_ESYS;
			*s = '/';
		}
	return mkdir(p, 0700) && errno != EEXIST ? -1 : 0;
}

int wk_egress_ca_open(const char *dir, struct al_err *err)
{
	char keyfile[PATH_MAX];

	if (G.open)
		return AL_OK;
	if (snprintf(keyfile, sizeof(keyfile), "%s/ca.key", dir) >= (int)sizeof(keyfile) ||
	    snprintf(G.file, sizeof(G.file), "%s/ca.pem", dir) >= (int)sizeof(G.file))
		return al_err_set(err, AL_EINVAL, "egress ca: %s: path too long", dir);
	if (mkdir_all(dir) || chmod(dir, 0700))
		return al_err_sys(err, "egress ca: %s", dir);
	if (!load(keyfile)) {
		char cn[64];
		int rc;

		snprintf(cn, sizeof(cn), "Airlock egress cache CA %08x", (unsigned)time(NULL));
		if (!(G.key = EVP_EC_gen("P-256")) ||
		    !(G.cert = make_cert(G.key, cn, CA_DAYS, NULL)) ||
		    !add_ext(G.cert, G.cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
		    !add_ext(G.cert, G.cert, NID_key_usage, "critical,keyCertSign,cRLSign") ||
		    !sign(G.cert, G.key))
			return ssl_fail(err, "making the CA");
		if ((rc = write_pem(keyfile, true, err)) || (rc = write_pem(G.file, false, err)))
			return rc;
	}
	if (!(G.leaf_key = EVP_EC_gen("P-256")) || !(G.server = SSL_CTX_new(TLS_server_method())) ||
	    !SSL_CTX_set_min_proto_version(G.server, TLS1_2_VERSION))
		return ssl_fail(err, "the server context");
	SSL_CTX_set_options(G.server, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	G.open = true;
	return AL_OK;
}

int wk_egress_ca_for(const struct al_policy *pol, const char *state_dir, struct al_err *err)
{
	char dir[PATH_MAX];

	for (size_t i = 0; i < pol->ntiers; i++)
		if (pol->tiers[i].egress_cache_https) {
			snprintf(dir, sizeof(dir), "%s/egress-ca",
				 state_dir ? state_dir : "/var/lib/airlock");
			return wk_egress_ca_open(dir, err);
		}
	return AL_OK;
}

const char *wk_egress_ca_file(void)
{
	return G.open ? G.file : NULL;
}

/* host's leaf: kept, or made now. */
static X509 *leaf_for(const char *host, bool literal)
{
	time_t now = time(NULL);
	struct leaf *l;
	char san[300];
	X509 *x;

	for (unsigned i = 0; i < LEAVES_MAX; i++)
		if (G.leaves[i].cert && !strcmp(G.leaves[i].host, host) &&
		    now - G.leaves[i].made < (time_t)LEAF_DAYS * 86400 / 2)
			return G.leaves[i].cert;
	snprintf(san, sizeof(san), "%s:%s", literal ? "IP" : "DNS", host);
	if (!(x = make_cert(G.leaf_key, host, LEAF_DAYS, G.cert)) ||
	    !add_ext(x, G.cert, NID_subject_alt_name, san) ||
	    !add_ext(x, G.cert, NID_basic_constraints, "critical,CA:FALSE") ||
	    !add_ext(x, G.cert, NID_key_usage, "critical,digitalSignature") ||
	    !add_ext(x, G.cert, NID_ext_key_usage, "serverAuth") || !sign(x, G.key)) {
		X509_free(x);
		return NULL;
	}
	l = &G.leaves[G.next_leaf++ % LEAVES_MAX];
	X509_free(l->cert);
	snprintf(l->host, sizeof(l->host), "%s", host);
	l->cert = x;
	l->made = now;
	return x;
}

SSL *wk_egress_ca_accept(const char *host, bool literal, struct al_err *err)
{
	X509 *leaf;
	SSL *ssl;

	if (!G.open) {
		al_err_set(err, AL_EINVAL, "egress ca: not open");
		return NULL;
	}
	if (!(leaf = leaf_for(host, literal))) {
		ssl_fail(err, "making a leaf");
		return NULL;
	}
	if (!(ssl = SSL_new(G.server)) || SSL_use_certificate(ssl, leaf) != 1 ||
	    SSL_use_PrivateKey(ssl, G.leaf_key) != 1 || SSL_add1_chain_cert(ssl, G.cert) != 1) {
		SSL_free(ssl);
		ssl_fail(err, "the job's side");
		return NULL;
	}
	return ssl;
}

/* The client context that trusts the host's store and ca_file: kept. */
static SSL_CTX *upstream_ctx(const char *ca_file, struct al_err *err)
{
	const char *key = ca_file ? ca_file : "";
	struct upstream *u = NULL;

	for (unsigned i = 0; i < UPSTREAM_CTXES; i++) {
		if (G.up[i].ctx && !strcmp(G.up[i].ca_file, key))
			return G.up[i].ctx;
		if (!u && !G.up[i].ctx)
			u = &G.up[i];
	}
	if (!u) { /* full: the first goes (its SSLs hold their own reference) */
		u = &G.up[0];
		SSL_CTX_free(u->ctx);
		free(u->ca_file);
		u->ctx = NULL;
	}
	if (!(u->ca_file = strdup(key))) {
		al_err_set(err, AL_ENOMEM, "egress ca: out of memory");
		return NULL;
	}
	if (!(u->ctx = SSL_CTX_new(TLS_client_method())) ||
	    !SSL_CTX_set_min_proto_version(u->ctx, TLS1_2_VERSION) ||
	    SSL_CTX_set_default_verify_paths(u->ctx) != 1 ||
	    (ca_file && SSL_CTX_load_verify_locations(u->ctx, ca_file, NULL) != 1)) {
		SSL_CTX_free(u->ctx);
		u->ctx = NULL;
		free(u->ca_file);
		u->ca_file = NULL;
		ssl_fail(err, ca_file ? ca_file : "the host's trust store");
		return NULL;
	}
	SSL_CTX_set_verify(u->ctx, SSL_VERIFY_PEER, NULL);
	return u->ctx;
}

SSL *wk_egress_ca_connect(const char *host, bool literal, const char *ca_file, struct al_err *err)
{
	SSL_CTX *ctx = upstream_ctx(ca_file, err);
	SSL *ssl;
	bool ok;

	if (!ctx)
		return NULL;
	if (!(ssl = SSL_new(ctx))) {
		ssl_fail(err, "the server's side");
		return NULL;
	}
	ok = literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1
		     : SSL_set_tlsext_host_name(ssl, host) == 1 && SSL_set1_host(ssl, host) == 1;
	if (!ok) {
		SSL_free(ssl);
		ssl_fail(err, "the server's name");
		return NULL;
	}
	return ssl;
}
