"""Which git repositories a run may be given (``RepoPolicy``), checked in one
place: by the API, an evaluation's dataset and the starter before a run
starts, and by the worker again before it clones (a run can be started
straight through Temporal).

The worker clones as itself, with its own git and ssh credentials, from its
own network: a repository is a URL of a scheme the operator allows
(REPO_ALLOWED_SCHEMES: https and ssh unless set), of a host the operator
allows (REPO_ALLOWED_HOSTS: any unless set), whose host resolves only to
public addresses, or to networks the operator allows (REPO_ALLOWED_NETWORKS:
none unless set). Never a path on the worker's disk or a ``file://`` URL,
never another transport (``ext::``, ``fd::``)."""

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

# The schemes an operator may allow, and those allowed unless set.
SCHEMES = ("https", "ssh", "http", "git")
DEFAULT_SCHEMES = ("https", "ssh")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# A host as a repository's URL may name it: a DNS name, or an IP address.
_HOST_NAME = re.compile(
    r"(?=.{1,253}\Z)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.?"
)
# A transport of git's own (``ext::cmd``, ``fd::0``): never allowed.
_TRANSPORT = re.compile(r"[A-Za-z0-9][A-Za-z0-9+.-]*::")
# scp-like ssh: [user@]host:path, the host before the first colon, no slash
# before it (git's own rule); [user@][::1]:path for an IPv6 address.
_SCP = re.compile(r"(?:[^@/:\s]+@)?(\[[0-9A-Fa-f:.]+\]|[^@/:\[\]\s]+):(?!//)(.+)")

# What a repository may be, as the refusals say it.
FORMS = "an https:// or ssh:// URL, or user@server:path"
# The most of a value a refusal shows.
_SHOWN = 100


@dataclass(frozen=True)
class RepoPolicy:
    """The repositories a run may be given (the REPO_ALLOWED_* settings)."""

    # The schemes allowed (scp-like user@host:path is "ssh").
    schemes: tuple[str, ...] = DEFAULT_SCHEMES
    # The host names allowed, each exactly or, as "*.example.com", any name
    # under it; empty: any host.
    hosts: tuple[str, ...] = ()
    # The networks a host may resolve into beside public addresses
    # (loopback, private, link-local ones); empty: public addresses only.
    networks: tuple[Network, ...] = ()


DEFAULT_POLICY = RepoPolicy()


class BadRepo(ValueError):
    """A repository a run may not be given; its message is one line naming
    the value, what is wrong and what is allowed ("'file:///x' is not
    allowed: ...; use ..."), which each caller names ("--repo", "field
    'repo'")."""


@dataclass(frozen=True)
class Target:
    """Where a repository's URL leads: its scheme, host and port (None: the
    scheme's own), and the addresses its host resolved to."""

    scheme: str
    host: str
    port: int | None
    addresses: tuple[Address, ...] = ()


def text(value: str) -> bool:
    """Whether ``value`` is printable text that UTF-8 can carry (no lone
    surrogate: Temporal's payloads could not)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return value.isprintable()


def shown(url: str) -> str:
    return repr(url if len(url) <= _SHOWN else url[:_SHOWN] + "...")


def target_of(url: str, policy: RepoPolicy = DEFAULT_POLICY) -> Target:
    """``url``'s scheme, host and port, once its form is one a run may be
    given and its scheme and host are allowed (no address looked up); else
    ``BadRepo``."""

    def refuse(why: str, allowed: str = "") -> BadRepo:
        return BadRepo(f"{shown(url)} is not allowed: {why}; use {allowed or FORMS}")

    if not text(url) or any(c.isspace() for c in url):
        raise refuse("it holds a space, a control character or a character that is not text")
    if _TRANSPORT.match(url):
        raise refuse("a git transport (name::address) is never allowed")
    scp = None if "://" in url else _SCP.fullmatch(url)
    if scp is not None:
        scheme, host, port = "ssh", scp.group(1), None
    elif "://" in url:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise refuse("its server or port is not one") from None
        scheme, host = parts.scheme.lower(), parts.hostname or ""
        if scheme == "file":
            raise refuse("a file:// URL reads the worker's own disk")
    else:
        raise refuse("a path names a directory on the worker's own disk")
    if scheme not in policy.schemes:
        allowed = ", ".join(f"{each}://" for each in policy.schemes)
        raise refuse(
            f"its scheme {scheme} is not one this service allows (REPO_ALLOWED_SCHEMES)",
            allowed + (" or user@server:path" if "ssh" in policy.schemes else ""),
        )
    host = host.strip("[]").lower()
    if not host or not (is_host_name(host) or ip_of(host)):
        raise refuse("it names no server, or one that is not a name or an address")
    if policy.hosts and not any(host_matches(host, each) for each in policy.hosts):
        raise refuse(
            f"its server {host} is not one this service allows (REPO_ALLOWED_HOSTS)",
            "a repository on " + ", ".join(policy.hosts),
        )
    return Target(scheme, host, port)


def checked(url: str, policy: RepoPolicy = DEFAULT_POLICY) -> Target:
    """``url``'s target, as the worker checks it before it clones: every
    address its host resolves to looked up and allowed (public, or in
    REPO_ALLOWED_NETWORKS); else ``BadRepo``, a host that does not resolve
    included. Blocking: a coroutine runs it in a thread."""
    return _checked(url, policy, unresolved_ok=False)


def checked_by_client(url: str, policy: RepoPolicy = DEFAULT_POLICY) -> Target:
    """As ``checked``, for a client of the service (the API, the starter, an
    evaluation): a host that does not resolve on the client's network is
    left to the worker's own check, on the worker's network."""
    return _checked(url, policy, unresolved_ok=True)


def _checked(url: str, policy: RepoPolicy, unresolved_ok: bool) -> Target:
    target = target_of(url, policy)
    literal = ip_of(target.host)
    if literal is not None:
        addresses: tuple[Address, ...] = (literal,)
    else:
        try:
            addresses = addresses_of(target.host, target.port)
        except (OSError, UnicodeError):
            if unresolved_ok:
                return target
            raise BadRepo(
                f"{shown(url)} is not allowed: its server {target.host} does not "
                "resolve to an address; use a repository on a server with a DNS name"
            ) from None
    address = not_allowed(addresses, policy.networks)
    if address is not None:
        said = "" if literal is not None else f"its server {target.host} resolves to "
        raise BadRepo(
            f"{shown(url)} is not allowed: {said or 'its server is '}{address}, "
            "a loopback, private or link-local address this service does not allow "
            "(REPO_ALLOWED_NETWORKS); use a repository on a public server"
        )
    return Target(target.scheme, target.host, target.port, addresses)


def addresses_of(host: str, port: int | None) -> tuple[Address, ...]:
    """Every address ``host`` (a DNS name) resolves to, once each (an IPv4
    address written as IPv6 as the IPv4 one); OSError or UnicodeError when
    it resolves to none. Blocking."""
    found = socket.getaddrinfo(host, port or 0, proto=socket.IPPROTO_TCP)
    return tuple(dict.fromkeys(_plain(ipaddress.ip_address(f[4][0])) for f in found))


def not_allowed(addresses: tuple[Address, ...], networks: tuple[Network, ...]) -> Address | None:
    """The first of ``addresses`` that is neither public nor in
    ``networks`` (a loopback, private or link-local one), or None."""
    for address in addresses:
        if not address.is_global and not any(address in net for net in networks):
            return address
    return None


def is_host_name(host: str) -> bool:
    """Whether ``host`` is a DNS name (lower case, as a URL's host is read)."""
    return _HOST_NAME.fullmatch(host) is not None


def ip_of(host: str) -> Address | None:
    """``host`` as an IP address (``[::1]`` too), or None when it is a name."""
    try:
        return _plain(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


def _plain(address: Address) -> Address:
    """An IPv4 address written as IPv6 (::ffff:127.0.0.1) as the IPv4 one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def host_matches(host: str, allowed: str) -> bool:
    """Whether ``host`` is ``allowed``, or under it (``*.example.com``)."""
    if allowed.startswith("*."):
        return host.endswith(allowed[1:])
    return host == allowed


def git_options(target: Target, policy: RepoPolicy) -> list[str]:
    """What git's clone of ``target`` runs with: no transport but the
    schemes ``policy`` allows (no file, ext or fd, whatever the worker's
    configuration says), no redirect followed (a public host may redirect
    to a private one), and an http(s) host pinned to the addresses
    checked (a name that resolves elsewhere by the time git looks it up)."""
    options = ["-c", "protocol.allow=never", "-c", "http.followRedirects=false"]
    for scheme in policy.schemes:
        options += ["-c", f"protocol.{scheme}.allow=always"]
    if target.scheme in ("http", "https") and target.addresses and not ip_of(target.host):
        port = target.port or (443 if target.scheme == "https" else 80)
        pinned = ",".join(
            f"[{each}]" if each.version == 6 else str(each) for each in target.addresses
        )
        options += ["-c", f"http.curloptResolve={target.host}:{port}:{pinned}"]
    return options


def parse_schemes(value: str) -> tuple[str, ...]:
    """REPO_ALLOWED_SCHEMES as a tuple; ValueError naming the first bad one."""
    schemes = tuple(dict.fromkeys(part.strip().lower() for part in value.split(",")))
    for scheme in schemes:
        if scheme not in SCHEMES:
            raise ValueError(f"{scheme!r} is not one")
    return schemes


def parse_hosts(value: str) -> tuple[str, ...]:
    hosts = tuple(dict.fromkeys(part.strip().lower() for part in value.split(",")))
    for host in hosts:
        name = host.removeprefix("*.")
        if not (is_host_name(name) or ip_of(name)) or "*" in name:
            raise ValueError(f"{host!r} is not a server name")
    return hosts


def parse_networks(value: str) -> tuple[Network, ...]:
    networks: list[Network] = []
    for part in (part.strip() for part in value.split(",")):
        try:
            networks.append(ipaddress.ip_network(part))
        except ValueError:
            raise ValueError(f"{part!r} is not a network") from None
    return tuple(networks)
