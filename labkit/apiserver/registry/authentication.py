"""authentication.k8s.io/v1: TokenReview and SelfSubjectReview, answered and not stored
(pkg/registry/authentication/tokenreview and selfsubjectreview).
"""

from __future__ import annotations

from labkit.apiserver.registry.authorization import ReviewStrategy


class TokenReviewStrategy(ReviewStrategy):
    """authentication.k8s.io/v1 TokenReview: whether a bearer token authenticates, as whom and for
    which audiences (answered by the server's token authenticators: authn.Authenticator.review)."""

    def review(self, obj, user, authorizer, namespace):
        raise NotImplementedError("the API answers TokenReviews with its authenticator")


class SelfSubjectReviewStrategy(ReviewStrategy):
    """`kubectl auth whoami`: the requesting user's name, UID, groups and extra."""

    def review(self, obj, user, authorizer, namespace):
        return dict(obj, status={"userInfo": user.info()})
