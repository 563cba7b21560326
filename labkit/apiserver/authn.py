"""Authentication: who sent a request, decided as kube-apiserver's authenticators decide it.

The chain (pkg/kubeapiserver/authenticator/config.go, `Config.New`), in upstream's order:

  1. x509 client certificates verified against the lab CA (the --client-ca-file)
     (apiserver pkg/authentication/request/x509/x509.go: `Authenticator.AuthenticateRequest`,
     `CommonNameUserConversion`);
  2. bearer tokens (request/bearertoken/bearertoken.go), tried by one token union in order: the
     static token file (token/tokenfile/tokenfile.go), then ServiceAccount JWTs signed by this
     server's key (pkg/serviceaccount/jwt.go, claims.go);
     A token that authenticated is not checked again for 10 seconds (the token cache,
     token/cache/cached_token_authenticator.go, with kube-apiserver's TokenSuccessCacheTTL of 10 s
     and no failure cache): a token bound to a Pod that was just deleted works until then;
  3. the union of (1) and (2) stops at the first authenticator that recognises the request;
     errors count only when nobody did (request/union/union.go: `unionAuthRequestHandler`);
  4. `system:authenticated` is appended to the groups (request/group/authenticated_group_adder.go);
  5. anonymous — only when no authenticator returned an error: a bad credential is a 401, never
     anonymous (`union.NewFailOnError`, request/anonymous/anonymous.go).

Each decision is recorded as a trace step of stage "authentication". The error details go
only into the trace (upstream logs them: "Unable to authenticate the request"); the client
gets the bare 401 Status (endpoints/filters/authentication.go: `Unauthorized`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from labkit.apiserver.certs import write_private
from labkit.apiserver.request import User
from labkit.apiserver.trace import Trace

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
# apiserver pkg/authentication/user/user.go and serviceaccount/util.go
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
POD_NAME, POD_UID = "authentication.kubernetes.io/pod-name", "authentication.kubernetes.io/pod-uid"
NODE_NAME, NODE_UID = "authentication.kubernetes.io/node-name", "authentication.kubernetes.io/node-uid"
ISSUED_CREDENTIAL_ID = "authentication.kubernetes.io/issued-credential-id"
STALE_TOKEN = "authentication.k8s.io/stale-token"
# what kubeadm passes as --service-account-issuer; --api-audiences defaults to the issuer
ISSUER = "https://kubernetes.default.svc.cluster.local"
API_AUDIENCES = [ISSUER]
SA_PREFIX = "system:serviceaccount:"
JWT_LEEWAY = 60          # go-jose jwt.DefaultLeeway
TOKEN_SUCCESS_CACHE_TTL = 10.0      # pkg/kubeapiserver/options/authentication.go TokenSuccessCacheTTL


class Unauthenticated(Exception):
    """No authenticator recognised the request and at least one returned an error (a 401)."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def _go_quote_list(values: list[str]) -> str:
    """%q of a []string: ["a" "b"]."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


# -- x509 ----------------------------------------------------------------------------------------

def _column_hex(data: bytes | None) -> str:
    return ":".join(f"{b:02X}" for b in data or b"")


def _ski(cert: x509.Certificate, kind) -> bytes | None:
    try:
        ext = cert.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None
    return ext.digest if kind is x509.SubjectKeyIdentifier else ext.key_identifier


def certificate_identifier(cert: x509.Certificate) -> str:
    """x509.go `certificateIdentifier`: SN=<decimal>, SKID=<hex>, AKID=<hex>."""
    return (f"SN={cert.serial_number}, SKID={_column_hex(_ski(cert, x509.SubjectKeyIdentifier))}, "
            f"AKID={_column_hex(_ski(cert, x509.AuthorityKeyIdentifier))}")


def _go_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _verify_error(leaf: x509.Certificate, ca: x509.Certificate, now: datetime) -> str | None:
    """What Go's x509.Certificate.Verify says about `leaf` with the lab CA as the only root and
    KeyUsages [ClientAuth] (x509.go `DefaultVerifyOptions`), or None when it verifies."""
    if now < leaf.not_valid_before_utc:
        return (f"x509: certificate has expired or is not yet valid: current time {_go_time(now)} is before "
                f"{_go_time(leaf.not_valid_before_utc)}")
    if now > leaf.not_valid_after_utc:
        return (f"x509: certificate has expired or is not yet valid: current time {_go_time(now)} is after "
                f"{_go_time(leaf.not_valid_after_utc)}")
    if leaf.issuer != ca.subject:
        return "x509: certificate signed by unknown authority"
    try:
        leaf.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        problem = "x509: ECDSA verification failure" if isinstance(ca.public_key(), ec.EllipticCurvePublicKey) \
            else "crypto/rsa: verification error"
        cn = ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return (f"x509: certificate signed by unknown authority (possibly because of {json.dumps(problem)} while "
                f"trying to verify candidate authority certificate {json.dumps(cn[0].value if cn else '')})")
    try:
        usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = None
    if usages is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usages \
            and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages:
        return "x509: certificate specifies an incompatible key usage"
    return None


def _uid_of(cert: x509.Certificate) -> str:
    """x509.go `parseUIDFromCert` (AllowParsingUserUIDFromCertAuth, on since 1.33)."""
    uids = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.USER_ID)]
    if not uids:
        return ""
    if len(uids) != 1:
        raise ValueError(f"expected 1 UID, but found multiple: [{' '.join(str(u) for u in uids)}]")
    if uids[0] == "":
        raise ValueError("UID cannot be an empty string")
    return str(uids[0])


class X509Authenticator:
    """Client certificates signed by the lab CA: CN is the user, every O a group."""

    name = "x509"

    def __init__(self, ca: x509.Certificate):
        self.ca = ca

    def authenticate(self, der: bytes | None, now: datetime | None = None) -> User | None:
        """The identity of the presented leaf certificate (DER), None when there is none or it
        names no user (empty CN); ValueError when it does not verify."""
        if not der:
            return None
        leaf = x509.load_der_x509_certificate(der)
        problem = _verify_error(leaf, self.ca, now or datetime.now(timezone.utc))
        if problem:
            raise ValueError(f"verifying certificate {certificate_identifier(leaf)} failed: {problem}")
        cn = leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if not cn or not cn[0].value:
            return None
        uid = _uid_of(leaf)
        groups = [str(a.value) for a in leaf.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
        return User(str(cn[0].value), groups, uid,
                        {CREDENTIAL_ID: ["X509SHA256=" + hashlib.sha256(der).hexdigest()]})


# -- static token file -------------------------------------------------------------------------

class TokenFileAuthenticator:
    """--token-auth-file: token,user,uid,"group1,group2" (token/tokenfile/tokenfile.go)."""

    name = "token-file"

    def __init__(self, users: dict[str, User]):
        self.users = users

    def authenticate(self, token: str) -> User | None:
        return self.users.get(token)


def load_token_file(path: Path) -> dict[str, User]:
    import csv
    users = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) >= 2 and row[0] and not row[0].startswith("#"):
                groups = [g.strip() for g in (row[3].split(",") if len(row) > 3 else []) if g.strip()]
                users[row[0]] = User(row[1], groups, row[2] if len(row) > 2 else "")
    return users


# -- ServiceAccount tokens ---------------------------------------------------------------------

def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def ensure_signing_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """The server's ServiceAccount token signing key (--service-account-signing-key-file), mode
    0600: an ECDSA P-256 key, so tokens are ES256 (pkg/serviceaccount/jwt.go
    `signerFromECDSAPrivateKey`; kubeadm makes an RSA key, which is RS256 — P-256 keys take
    milliseconds to make, not a second)."""
    path = Path(path)
    if path.exists():
        return serialization.load_pem_private_key(path.read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    write_private(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return key


def key_id(public_key) -> str:
    """pkg/serviceaccount/jwt.go `keyIDFromPublicKey`: base64url(SHA-256(PKIX DER))."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


@dataclass
class BoundObject:
    kind: str            # Pod, Secret or Node
    name: str
    uid: str


class ServiceAccountTokens:
    """Bound ServiceAccount tokens: issued by TokenRequest (`issue`), validated as
    pkg/serviceaccount/jwt.go `jwtTokenAuthenticator.AuthenticateToken` and claims.go
    `validator.Validate` do (`authenticate`). `lookup(resource, namespace, name)` returns the
    stored object or None."""

    name = "serviceaccount-jwt"

    def __init__(self, key: ec.EllipticCurvePrivateKey, lookup, issuer: str = ISSUER, audiences: list[str] | None = None):
        self.key = key
        self.kid = key_id(key.public_key())
        self.lookup = lookup
        self.issuer = issuer
        self.audiences = list(audiences or API_AUDIENCES)

    # -- issuing (claims.go `Claims`, jwt.go `GenerateToken`) -----------------------------------
    def issue(self, sa: dict, audiences: list[str], expiration: int, bound: list[BoundObject] = (),
              warnafter: int = 0, now: float | None = None) -> tuple[str, str]:
        """A signed token and its jti."""
        now = int(now if now is not None else time.time())
        meta = sa["metadata"]
        jti = str(uuid.uuid4())
        private = {"namespace": meta["namespace"],
                   "serviceaccount": {"name": meta["name"], "uid": meta.get("uid", "")}}
        for ref in bound:
            private[ref.kind.lower()] = {k: v for k, v in (("name", ref.name), ("uid", ref.uid)) if v}
        if warnafter:
            private["warnafter"] = now + warnafter
        claims = {"aud": list(audiences), "exp": now + expiration, "iat": now, "iss": self.issuer, "jti": jti,
                  "kubernetes.io": private, "nbf": now, "sub": f"{SA_PREFIX}{meta['namespace']}:{meta['name']}"}
        header = {"alg": "ES256", "kid": self.kid}
        signing_input = f"{_b64(json.dumps(header, separators=(',', ':')).encode())}." \
                        f"{_b64(json.dumps(claims, separators=(',', ':')).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}", jti

    # -- validating ----------------------------------------------------------------------------
    def authenticate(self, token: str, annotations: dict | None = None,
                     now: float | None = None, audiences: list[str] | None = None) -> User | None:
        """The token's user, None when the token is not this issuer's, ValueError when it is but
        does not validate. `audiences` are the target audiences (a TokenReview's spec.audiences;
        the API audiences otherwise)."""
        return self.authenticate_for(token, annotations, now, audiences)[0]

    def authenticate_for(self, token: str, annotations: dict | None = None, now: float | None = None,
                         audiences: list[str] | None = None) -> tuple[User | None, list[str]]:
        """`authenticate`, and the target audiences the token is for (jwt.go: the intersection
        of the target audiences and the token's)."""
        target = list(audiences or self.audiences)
        parts = token.split(".")
        if len(parts) != 3:
            return None, []                     # not a JWT: not ours
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except (ValueError, UnicodeDecodeError):
            return None, []
        if not isinstance(claims, dict) or not isinstance(header, dict) or claims.get("iss") != self.issuer:
            return None, []                     # jwt.go `hasCorrectIssuer`: another issuer's token
        try:
            if header.get("alg") != "ES256" or len(signature) != 64:
                raise InvalidSignature()
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            self.key.public_key().verify(der, f"{parts[0]}.{parts[1]}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise ValueError("go-jose/go-jose: error in cryptographic primitive")
        audiences = claims.get("aud") or []
        if isinstance(audiences, str):
            audiences = [audiences]
        matched = [a for a in target if a in audiences]
        if not matched:
            raise ValueError(f"token audiences {_go_quote_list(audiences)} is invalid for the target audiences "
                             f"{_go_quote_list(target)}")
        return self._validate(claims, annotations if annotations is not None else {},
                              time.time() if now is None else now), matched

    def _validate(self, claims: dict, annotations: dict, now: float) -> User:
        """claims.go `validator.Validate`."""
        if "exp" in claims and now > claims["exp"] + JWT_LEEWAY:
            raise ValueError("service account token has expired")
        if "nbf" in claims and now + JWT_LEEWAY < claims["nbf"]:
            raise ValueError("service account token is not valid yet")
        if "iat" in claims and now + JWT_LEEWAY < claims["iat"]:
            raise ValueError("service account token is issued in the future")
        private = claims.get("kubernetes.io") or {}
        namespace = private.get("namespace", "")
        saref = private.get("serviceaccount") or {}
        invalid_if_deleted_before = now - JWT_LEEWAY

        def deleted(obj: dict) -> bool:
            stamp = obj["metadata"].get("deletionTimestamp")
            if not stamp:
                return False
            when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
            return when < invalid_if_deleted_before

        sa = self.lookup("serviceaccounts", namespace, saref.get("name", ""))
        if sa is None:
            raise ValueError(f'serviceaccounts "{saref.get("name", "")}" not found')
        if sa["metadata"].get("uid", "") != saref.get("uid", ""):
            raise ValueError(f"service account UID ({sa['metadata'].get('uid', '')}) does not match claim "
                             f"({saref.get('uid', '')})")
        if deleted(sa):
            raise ValueError(f"service account {namespace}/{saref.get('name', '')} has been deleted")
        extra: dict[str, list[str]] = {}
        for kind, resource, scoped in (("secret", "secrets", True), ("pod", "pods", True)):
            ref = private.get(kind)
            if ref is None:
                continue
            obj = self.lookup(resource, namespace, ref.get("name", ""))
            if obj is None:
                raise ValueError("service account token has been invalidated")
            if obj["metadata"].get("uid", "") != ref.get("uid", ""):
                owner = "secret" if kind == "secret" else "pod"
                raise ValueError(f"{owner} UID ({obj['metadata'].get('uid', '')}) does not match service account "
                                 f"{owner} ref claim ({ref.get('uid', '')})")
            if deleted(obj):
                raise ValueError("service account token has been invalidated")
            if kind == "pod":
                extra[POD_NAME], extra[POD_UID] = [ref.get("name", "")], [ref.get("uid", "")]
        node = private.get("node")
        if node is not None:
            if "pod" in private:      # a pod-bound token's node is information, not a binding
                extra[NODE_NAME] = [node.get("name", "")]
                if node.get("uid"):
                    extra[NODE_UID] = [node["uid"]]
            else:
                obj = self.lookup("nodes", None, node.get("name", ""))
                if obj is None:
                    raise ValueError("service account token has been invalidated")
                if obj["metadata"].get("uid", "") != node.get("uid", ""):
                    raise ValueError(f"node UID ({obj['metadata'].get('uid', '')}) does not match service account "
                                     f"node ref claim ({node.get('uid', '')})")
                if deleted(obj):
                    raise ValueError("service account token has been invalidated")
                extra[NODE_NAME], extra[NODE_UID] = [node.get("name", "")], [node.get("uid", "")]
        warnafter = private.get("warnafter")
        if warnafter and now > warnafter:
            annotations[STALE_TOKEN] = (f"subject: {claims.get('sub', '')}, seconds after warning threshold: "
                                        f"{int(now) - int(warnafter)}")
        if claims.get("jti"):
            extra[CREDENTIAL_ID] = [f"JTI={claims['jti']}"]
        return User(f"{SA_PREFIX}{namespace}:{saref.get('name', '')}",
                        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
                        saref.get("uid", ""), extra)


# -- the chain -----------------------------------------------------------------------------------

def bearer_token(authorization: str) -> str | None:
    """request/bearertoken/bearertoken.go: `Bearer <token>` (scheme case-insensitive)."""
    parts = authorization.strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def attempted_methods(authorization: str, access_token: str, has_certificate: bool) -> str:
    """filters/authn_audit.go `getAuthMethods`: the failed-authentication audit event's message."""
    methods = []
    if authorization.strip().lower().startswith("basic "):
        methods.append("basic")
    parts = authorization.strip().split(" ")
    if len(parts) > 1 and parts[0].lower() == "bearer":
        methods.append("bearer")
    if access_token.strip():
        methods.append("access_token")
    if has_certificate:
        methods.append("x509")
    if methods:
        return f"Authentication failed, attempted: {', '.join(methods)}"
    return "Authentication failed, no credentials provided"


class Authenticator:
    """The whole chain. `authenticate` returns the caller's User or raises Unauthenticated."""

    def __init__(self, x509_auth: X509Authenticator | None, token_file: TokenFileAuthenticator,
                 service_accounts: ServiceAccountTokens | None, anonymous: bool = True,
                 token_cache_ttl: float = TOKEN_SUCCESS_CACHE_TTL, clock=time.monotonic):
        self.x509 = x509_auth
        self.token_file = token_file
        self.service_accounts = service_accounts
        self.anonymous = anonymous
        self.token_cache_ttl = token_cache_ttl
        self.clock = clock
        self._token_cache: dict[str, tuple[float, User, dict]] = {}     # sha256(token) -> (until, user, annotations)

    def authenticate(self, certificate: bytes | None, authorization: str, trace: Trace) -> User:
        errors: list[str] = []
        identity = None
        if self.x509 is not None and certificate:
            try:
                identity = self.x509.authenticate(certificate)
            except ValueError as exc:
                errors.append(str(exc))
                trace.add("authentication", "x509", "error", f"the client certificate did not verify: {exc}")
            else:
                if identity is not None:
                    trace.add("authentication", "x509", "authenticated",
                              f"the client certificate's CN {identity.name!r} is the user and its O values "
                              f"{identity.groups} the groups", user=identity.name)
                else:
                    trace.add("authentication", "x509", "no opinion",
                              "the client certificate verified but has an empty CN, so it names no user")
        token = bearer_token(authorization) if identity is None else None
        if token is not None:
            identity = self._token(token, errors, trace)
        if identity is not None:
            if AUTHENTICATED not in identity.groups and UNAUTHENTICATED not in identity.groups \
                    and identity.name != ANONYMOUS:
                identity.groups = identity.groups + [AUTHENTICATED]     # AuthenticatedGroupAdder
            return identity
        if errors or not self.anonymous:
            trace.add("authentication", "union", "unauthenticated",
                      "no authenticator recognised the request and at least one returned an error, so it is "
                      "answered 401 Unauthorized (a bad credential never falls back to anonymous)", errors=errors)
            raise Unauthenticated(errors)
        trace.add("authentication", "anonymous", "authenticated",
                  "the request carried no credentials, so it is system:anonymous in group "
                  "system:unauthenticated (--anonymous-auth defaults to true)")
        return User(ANONYMOUS, [UNAUTHENTICATED])

    def review(self, token: str, audiences: list[str]) -> dict:
        """A TokenReview's status (pkg/registry/authentication/tokenreview/storage.go REST.Create):
        the token alone in a bearer header through the token authenticators, for spec.audiences
        or the API audiences. The static token file is audience-agnostic
        (authenticator.WrapAudienceAgnosticToken): it answers only for target audiences that meet
        the API audiences, and its users are for that intersection. Unauthenticated, the status
        carries the union's error (one error alone, several as `[a, b]`; `invalid bearer token`
        when nothing recognised the token). Not cached (upstream's token cache is keyed by
        audiences too; a review only ever asks once here)."""
        target = list(audiences or API_AUDIENCES)
        implicit = [a for a in target if a in API_AUDIENCES]
        errors: list[str] = []
        identity, matched = None, []
        if implicit:
            identity = self.token_file.authenticate(token)
            matched = implicit
        if identity is None and self.service_accounts is not None:
            try:
                identity, matched = self.service_accounts.authenticate_for(token, {}, audiences=target)
            except ValueError as exc:
                errors.append(str(exc))
        if identity is None:
            errors = errors or ["invalid bearer token"]
            return {"user": {}, "error": errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"}
        user = User(identity.name, list(identity.groups), identity.uid, dict(identity.extra))
        if AUTHENTICATED not in user.groups and UNAUTHENTICATED not in user.groups:
            user.groups.append(AUTHENTICATED)       # AuthenticatedGroupAdder wraps the token union
        return {"authenticated": True, "user": user.info(), "audiences": matched}

    def _token(self, token: str, errors: list[str], trace: Trace) -> User | None:
        """The token cache around the token union."""
        key, now = hashlib.sha256(token.encode()).hexdigest(), self.clock()
        cached = self._token_cache.get(key)
        if cached is not None and cached[0] > now:
            _, user, annotations = cached
            trace.annotations.update(annotations)
            trace.add("authentication", "token-cache", "authenticated",
                      f"the bearer token authenticated as {user.name!r} less than {self.token_cache_ttl:g} s ago, so "
                      "the cached result is used without checking it again", user=user.name)
            return User(user.name, list(user.groups), user.uid, dict(user.extra))
        annotations: dict = {}
        user = self._token_union(token, errors, trace, annotations)
        if user is not None and self.token_cache_ttl > 0:
            if len(self._token_cache) > 1000:
                self._token_cache = {k: v for k, v in list(self._token_cache.items()) if v[0] > now}
            self._token_cache[key] = (now + self.token_cache_ttl, User(user.name, list(user.groups), user.uid,
                                                                      dict(user.extra)), annotations)
        return user

    def _token_union(self, token: str, errors: list[str], trace: Trace, annotations: dict) -> User | None:
        """The token union: static token file, then ServiceAccount JWTs; an unrecognised token
        is an error ("invalid bearer token")."""
        identity = self.token_file.authenticate(token)
        if identity is not None:
            trace.add("authentication", "token-file", "authenticated",
                      f"the bearer token is in the static token file as user {identity.name!r}", user=identity.name)
            return User(identity.name, list(identity.groups), identity.uid, dict(identity.extra))
        if self.service_accounts is not None:
            try:
                identity = self.service_accounts.authenticate(token, annotations)
            except ValueError as exc:
                errors.append(str(exc))
                trace.add("authentication", "serviceaccount-jwt", "error",
                          f"the bearer token is a ServiceAccount token of this server that did not validate: {exc}")
                return None
            trace.annotations.update(annotations)
            if identity is not None:
                trace.add("authentication", "serviceaccount-jwt", "authenticated",
                          f"the bearer token is a valid ServiceAccount token for {identity.name!r}",
                          user=identity.name, extra=identity.extra)
                return identity
        errors.append("invalid bearer token")
        trace.add("authentication", "bearer", "error",
                  "the bearer token is neither in the static token file nor a ServiceAccount token of this "
                  "server: invalid bearer token")
        return None
