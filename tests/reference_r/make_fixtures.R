# Reference fixtures for the regression, weighting and cheating-detection estimators
# (issue 28), fitted by R's own packages on data generated here.
#
#   R_LIBS=/path/to/library Rscript tests/reference_r/make_fixtures.R
#
# Needs R with rr (Blair, Imai and Zhou; rrreg) and RRreg (Heck and Moshagen; RRuni's CDMsym)
# built from their CRAN sources, survey (Lumley) and jsonlite. None of them is installed by CI:
# the JSON files this writes beside it are committed, and the Python tests read them.
# Every data set is in its fixture, so the tests fit exactly the data R fitted.
suppressPackageStartupMessages({
  library(rr)
  library(RRreg)
  library(survey)
  library(jsonlite)
})
here <- dirname(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE)))
versions <- list(R = R.version.string, rr = as.character(packageVersion("rr")),
                 RRreg = as.character(packageVersion("RRreg")),
                 survey = as.character(packageVersion("survey")),
                 jsonlite = as.character(packageVersion("jsonlite")))
save <- function(x, name) {
  write_json(x, file.path(here, name), digits = NA, auto_unbox = TRUE, pretty = TRUE,
             na = "null", dataframe = "columns")
}
logistic <- function(x) 1 / (1 + exp(-x))

# ---------------------------------------------------------------------------------------------
# 1. rrreg, design = "forced-known": P(report yes) = c g(x'b) + d, c = p, d = p1.
# Observed information computed here analytically (the negative Hessian of rr's obs.llik);
# rrreg's own default SEs are the outer product of scores (kept as se_opg), and with
# optim = TRUE a numerical Hessian (se_optim_hessian).
observed_information <- function(b, x, y, c, d, w = rep(1, length(y))) {
  g <- logistic(drop(x %*% b))
  q1 <- c * g + d
  q0 <- 1 - c * g - d
  h <- y / q1 - (1 - y) / q0
  dg <- g * (1 - g)
  second <- c * dg * (1 - 2 * g) * h - c^2 * dg^2 * (y / q1^2 + (1 - y) / q0^2)
  -crossprod(x, x * (w * second))
}
scores <- function(b, x, y, c, d) {
  g <- logistic(drop(x %*% b))
  h <- y / (c * g + d) - (1 - y) / (1 - c * g - d)
  x * (c * g * (1 - g) * h)
}
loglik <- function(b, x, y, c, d, w = rep(1, length(y))) {
  g <- logistic(drop(x %*% b))
  sum(w * (y * log(c * g + d) + (1 - y) * log(1 - c * g - d)))
}
rrreg_case <- function(name, formula, data, p, p1, p0, groups) {
  # do.call puts the formula itself in the call, where predict.rrreg reads it.
  arguments <- list(formula = formula, p = p, p1 = p1, p0 = p0, design = "forced-known",
                    data = data, start = rep(0, ncol(model.matrix(formula, data))),
                    em.converge = 1e-14, maxIter = 100000)
  fit <- do.call(rrreg, arguments)
  fit_h <- do.call(rrreg, c(arguments, optim = TRUE))
  x <- model.matrix(formula, data)
  y <- model.response(model.frame(formula, data))
  b <- fit$est
  info <- observed_information(b, x, y, p, p1)
  vcov <- solve(info)
  se <- sqrt(diag(vcov))
  z <- qnorm(0.975)
  predicted <- list()
  for (g in groups) {
    for (level in levels(data[[g]])) {
      subset <- data[data[[g]] == level, , drop = FALSE]
      xs <- model.matrix(formula, subset)
      # rr's own point: predict(avg = TRUE) on the group's rows; its delta-method SE here.
      est <- predict(fit, newdata = subset, avg = TRUE)$est[1, 1]
      gs <- logistic(drop(xs %*% b))
      grad <- colMeans(xs * (gs * (1 - gs)))
      predicted[[length(predicted) + 1]] <- list(
        variable = g, level = level, n = nrow(subset), prevalence = est,
        standard_error = sqrt(drop(t(grad) %*% vcov %*% grad)))
    }
  }
  est_all <- predict(fit, avg = TRUE)$est[1, 1]
  list(name = name, formula = deparse(formula), p = p, p1 = p1, p0 = p0,
       data = data, levels = lapply(Filter(is.factor, data), levels), coefficient_names = colnames(x), coefficients = unname(b),
       se_observed = unname(se), vcov_observed = unname(vcov),
       ci_low = unname(b - z * se), ci_high = unname(b + z * se),
       se_opg = unname(fit$se), se_optim_hessian = unname(fit_h$se),
       loglik = loglik(b, x, y, p, p1), prevalence_all = est_all, predicted = predicted)
}

set.seed(28)
n <- 2000
d1 <- data.frame(age = round(runif(n, 18, 80)),
                 region = factor(sample(c("north", "south", "west"), n, TRUE, c(.5, .3, .2)),
                                 levels = c("north", "south", "west")),
                 sex = factor(sample(c("female", "male"), n, TRUE), levels = c("female", "male")))
eta <- -1 + 0.02 * (d1$age - 45) + 0.6 * (d1$region == "south") - 0.5 * (d1$region == "west") +
  0.4 * (d1$sex == "male")
truth1 <- rbinom(n, 1, logistic(eta))
u <- runif(n)
p <- 0.6; p1 <- 0.25; p0 <- 0.15
d1$smoked <- ifelse(u < p, truth1, ifelse(u < p + p1, 1, 0))
case1 <- rrreg_case("numeric_and_factors", smoked ~ age + region + sex, d1, p, p1, p0,
                    c("region", "sex"))

n <- 1500
d2 <- data.frame(sleep = factor(sample(c("under 6", "6 to 8", "over 8"), n, TRUE, c(.3, .5, .2)),
                                levels = c("under 6", "6 to 8", "over 8")),
                 drinks = factor(sample(c("No", "Yes"), n, TRUE, c(.6, .4)), levels = c("No", "Yes")))
eta <- -0.3 + 0.8 * (d2$sleep == "6 to 8") - 0.7 * (d2$sleep == "over 8") + 1.1 * (d2$drinks == "Yes")
truth2 <- rbinom(n, 1, logistic(eta))
u <- runif(n)
alpha <- tanh(1.5 / 2)  # epsilon 1.5 with beta = 1/2: p1 = p0
d2$smoked <- ifelse(u < alpha, truth2, ifelse(u < alpha + (1 - alpha) / 2, 1, 0))
case2 <- rrreg_case("categorical_only", smoked ~ sleep + drinks, d2, alpha, (1 - alpha) / 2,
                    (1 - alpha) / 2, c("sleep", "drinks"))
save(list(about = paste(
  "rr::rrreg(design = 'forced-known') fits (start 0, em.converge 1e-14) on the data below;",
  "se_observed, vcov_observed, ci_* (Wald 95%), loglik and predicted standard errors computed",
  "by make_fixtures.R from rr's likelihood (observed information = minus its Hessian, analytic);",
  "se_opg: rrreg's default (outer product of scores); se_optim_hessian: rrreg(optim = TRUE);",
  "prevalence: predict(fit, newdata = group rows, avg = TRUE)."),
  versions = versions, cases = list(case1, case2)), "rrreg_forced_known.json")

# ---------------------------------------------------------------------------------------------
# 2. RRreg's CDMsym (RRuni(model = "CDMsym")): p = (yes1, no1, yes2, no2), the probabilities of
# being directed to say yes / no in group 1 and 2; pi = honest yes, beta = honest no,
# gamma = answering no regardless.
cdm_case <- function(name, p, n1, n2, pi, gamma) {
  n <- n1 + n2
  group <- c(rep(1, n1), rep(2, n2))
  state <- sample(c("yes", "no", "cheat"), n, TRUE, c(pi, 1 - pi - gamma, gamma))
  u <- runif(n)
  yes <- ifelse(group == 1, p[1], p[3])
  no <- ifelse(group == 1, p[2], p[4])
  response <- ifelse(state == "cheat", 0,
                     ifelse(u < yes, 1, ifelse(u < yes + no, 0, as.integer(state == "yes"))))
  fit <- RRuni(response = response, model = "CDMsym", p = p, group = group, MLest = TRUE)
  list(name = name, p = p, group = group, response = response,
       yes_counts = c(sum(response[group == 1]), sum(response[group == 2])),
       n = c(n1, n2), pi = fit$pi, pi_se = fit$piSE, beta = fit$beta, gamma = fit$gamma,
       gamma_se = fit$gammaSE,
       # RRuni's own logLik is NA for CDMsym (its RRuni.ll gets a scalar pi): RRreg's
       # CDMsym log-likelihood function at the estimates instead.
       loglik = RRreg:::RRuni.CDMsym.ll(c(fit$pi, fit$gamma), response, p, group))
}
set.seed(1998)
cdm <- list(
  cdm_case("symmetric_mirror", c(0.3, 0.1, 0.1, 0.3), 800, 800, 0.2, 0.1),
  cdm_case("unequal_groups", c(0.25, 0.15, 0.05, 0.35), 1200, 700, 0.35, 0.15),
  cdm_case("few_cheaters", c(0.35, 0.15, 0.15, 0.35), 2000, 2000, 0.1, 0.05))
save(list(about = paste(
  "RRreg::RRuni(model = 'CDMsym', MLest = TRUE) on the responses below (1 = yes);",
  "all three have interior estimates, where RRuni returns its closed form (Ostapczuk et al.",
  "2009) with SEs from lambda (1 - lambda) / (n - 1); loglik is RRreg's RRuni.CDMsym.ll there.",
  "RRuni gives no SE for beta."), versions = versions, cases = cdm), "cdmsym.json")

# ---------------------------------------------------------------------------------------------
# 3. Raking (survey::calibrate(calfun = "raking"), same weights as survey::rake) to population
# margins, the weighted reported rate and its linearization SE (svymean on the calibrated
# design), and the weighted rrreg likelihood with its sandwich variance, linearized through
# the calibration (svytotal of the influence functions on the calibrated design).
set.seed(3)
n <- 1200
d3 <- data.frame(sex = factor(sample(c("female", "male"), n, TRUE, c(.65, .35)),
                              levels = c("female", "male")),
                 age = factor(sample(c("18-34", "35-54", "55+"), n, TRUE, c(.5, .3, .2)),
                              levels = c("18-34", "35-54", "55+")))
eta <- -0.8 + 0.7 * (d3$sex == "male") + 0.5 * (d3$age == "35-54") + 1.0 * (d3$age == "55+")
truth3 <- rbinom(n, 1, logistic(eta))
u <- runif(n)
p <- 0.55; p1 <- 0.2; p0 <- 0.25
d3$smoked <- ifelse(u < p, truth3, ifelse(u < p + p1, 1, 0))
margins <- list(sex = c(female = 0.51, male = 0.49), age = c("18-34" = 0.3, "35-54" = 0.35, "55+" = 0.35))
design <- svydesign(ids = ~1, data = d3)
population <- c(`(Intercept)` = n, sexmale = n * 0.49, `age35-54` = n * 0.35, `age55+` = n * 0.35)
raked <- calibrate(design, ~sex + age, population, calfun = "raking", epsilon = 1e-12, maxit = 1000)
raked_ipf <- rake(design, list(~sex, ~age),
                  list(data.frame(sex = c("female", "male"), Freq = n * c(0.51, 0.49)),
                       data.frame(age = c("18-34", "35-54", "55+"), Freq = n * c(0.3, 0.35, 0.35))),
                  control = list(maxit = 1000, epsilon = 1e-12, verbose = FALSE))
w <- weights(raked)
rate <- svymean(~smoked, raked)
x <- model.matrix(~sex + age, d3)
negll <- function(b) -loglik(b, x, d3$smoked, p, p1, w)
grad <- function(b) -colSums(w * scores(b, x, d3$smoked, p, p1))
opt <- optim(rep(0, ncol(x)), negll, grad, method = "BFGS",
             control = list(reltol = 1e-16, maxit = 10000))
b <- opt$par
info <- observed_information(b, x, d3$smoked, p, p1, w)
influence <- scores(b, x, d3$smoked, p, p1) %*% solve(info)
colnames(influence) <- paste0("b", seq_len(ncol(x)))
raked_inf <- update(raked, b1 = influence[, 1], b2 = influence[, 2], b3 = influence[, 3],
                    b4 = influence[, 4])
vcov_sandwich <- vcov(svytotal(~b1 + b2 + b3 + b4, raked_inf))
save(list(about = paste(
  "survey::calibrate(~sex + age, calfun = 'raking') of an equal-probability sample to the",
  "margins below (population scaled to n), weights equal to survey::rake's;",
  "rate = svymean(~smoked) on the calibrated design with its SE (linearization, calibration",
  "residuals); regression: the weighted rrreg forced-known log-likelihood maximized by optim",
  "(BFGS, reltol 1e-16, analytic gradient) and the variance of its influence functions",
  "(scores times the inverse weighted observed information) by svytotal on the calibrated",
  "design."),
  versions = versions, data = d3, levels = lapply(Filter(is.factor, d3), levels), margins = lapply(margins, as.list), p = p, p1 = p1, p0 = p0,
  weights = unname(w), weights_rake = unname(weights(raked_ipf)),
  effective_n = sum(w)^2 / sum(w^2),
  rate = as.numeric(coef(rate)), rate_se = as.numeric(SE(rate)),
  coefficient_names = colnames(x), coefficients = b, gradient_at_fit = grad(b),
  vcov_sandwich = unname(vcov_sandwich), se_sandwich = unname(sqrt(diag(vcov_sandwich)))),
  "raking.json")
# ---------------------------------------------------------------------------------------------
# 4. A randomized covariate (neither rr nor RRreg fits one): the same likelihood maximized
# directly with optim, the true covariate summed over, P(x = 1 | region) free per region
# (logit th), and the standard errors from optimHess (a numerical Hessian).
set.seed(4)
n <- 3000
region <- factor(sample(c("north", "south"), n, TRUE, c(.6, .4)), levels = c("north", "south"))
south <- as.numeric(region == "south")
xtrue <- rbinom(n, 1, ifelse(south == 1, .6, .3))
ytrue <- rbinom(n, 1, logistic(-0.4 + 1.0 * xtrue + 0.5 * south))
ax <- 0.7; bx <- 0.5; ay <- 0.6; by <- 0.4  # alpha and P(forced yes) of x and y
xrep <- ifelse(runif(n) < ax, xtrue, rbinom(n, 1, bx))
yrep <- ifelse(runif(n) < ay, ytrue, rbinom(n, 1, by))
negll <- function(par) {
  px1 <- logistic(ifelse(south == 1, par[5], par[4]))
  lik <- 0
  for (t in 0:1) {
    forced <- (1 - ax) * ifelse(xrep == 1, bx, 1 - bx)
    mx <- forced + ax * (xrep == t)
    py <- ay * logistic(par[1] + par[2] * t + par[3] * south) + (1 - ay) * by
    lik <- lik + (if (t == 1) px1 else 1 - px1) * mx * ifelse(yrep == 1, py, 1 - py)
  }
  -sum(log(lik))
}
opt <- optim(rep(0, 5), negll, method = "BFGS", control = list(reltol = 1e-15, maxit = 10000))
opt <- optim(opt$par, negll, method = "Nelder-Mead", control = list(reltol = 1e-15, maxit = 20000))
opt <- optim(opt$par, negll, method = "BFGS", control = list(reltol = 1e-15, maxit = 10000))
hessian <- optimHess(opt$par, negll)
latent_vcov <- solve(hessian)
save(list(about = paste(
  "A randomized yes/no outcome y (alpha ay, forced yes by) on a randomized yes/no covariate x",
  "(alpha ax, forced yes bx) and a plain region: the likelihood summing over the true x with",
  "P(x = 1 | region) = logistic(th_region) maximized by optim (BFGS, Nelder-Mead, BFGS;",
  "reltol 1e-15); vcov = solve(optimHess). Parameters: (Intercept), x, regionsouth,",
  "th_north, th_south."),
  versions = versions, data = data.frame(y = yrep, x = xrep, region = region),
  levels = list(region = levels(region)), ax = ax, bx = bx, ay = ay, by = by,
  parameters = opt$par, vcov = latent_vcov, se = sqrt(diag(latent_vcov)), loglik = -opt$value),
  "latent_covariate.json")
cat("wrote rrreg_forced_known.json, cdmsym.json, raking.json, latent_covariate.json\n")
