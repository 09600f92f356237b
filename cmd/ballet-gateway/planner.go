package main

import (
	"net/http"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/tracker"
)

// newProvider builds the planner's model from BALLET_PLANNER_*; nil when no
// provider is configured (the planner is then off).
func newProvider(cfg *gateway.Config) (provider.Provider, error) {
	switch cfg.PlannerProvider {
	case "":
		return nil, nil
	case "scripted":
		script := provider.DefaultScript()
		if cfg.PlannerScript != "" {
			s, err := provider.LoadScript(cfg.PlannerScript)
			if err != nil {
				return nil, &gateway.ConfigError{Var: "BALLET_PLANNER_SCRIPT", Value: cfg.PlannerScript, Msg: err.Error()}
			}
			script = s
		}
		return provider.NewScripted(script), nil
	case "anthropic":
		p, err := provider.NewAnthropic(&provider.AnthropicOptions{
			BaseURL: cfg.PlannerBaseURL, APIKey: cfg.PlannerAPIKey, Model: cfg.PlannerModel,
		})
		if err != nil {
			return nil, &gateway.ConfigError{Var: "BALLET_PLANNER_PROVIDER", Value: "anthropic", Msg: err.Error()}
		}
		return p, nil
	case "openai":
		p, err := provider.NewOpenAI(&provider.OpenAIOptions{
			BaseURL: cfg.PlannerBaseURL, APIKey: cfg.PlannerAPIKey, Model: cfg.PlannerModel,
		})
		if err != nil {
			return nil, &gateway.ConfigError{Var: "BALLET_PLANNER_PROVIDER", Value: "openai", Msg: err.Error()}
		}
		return p, nil
	}
	return nil, &gateway.ConfigError{Var: "BALLET_PLANNER_PROVIDER", Value: cfg.PlannerProvider, Msg: "want anthropic, openai or scripted"}
}

// apiMux serves the tracker's REST API and, when set, the planner's sessions.
func apiMux(trackerAPI, plannerAPI http.Handler) http.Handler {
	if plannerAPI == nil {
		return trackerAPI
	}
	return httpapi.Join(trackerAPI, plannerAPI)
}

// serviceOptions are the tracker's and the planner's settings in cfg, with the tracker's
// admin subjects; the planner's provider, bus, logger and observer are the caller's.
func serviceOptions(cfg *gateway.Config, admins []string) (*tracker.Options, planner.Options) {
	return &tracker.Options{AdminSubjects: admins, MaxTitleChars: cfg.MaxTitleChars, MaxDescriptionBytes: cfg.MaxDescriptionBytes},
		planner.Options{
			Lease: cfg.PlannerLease, ResumeWindow: cfg.PlannerResume, MaxRounds: cfg.PlannerMaxRounds,
			MaxMessageBytes: cfg.MaxPlannerMessageBytes, TurnsPerSubject: cfg.PlannerTurnsPerSubject, SessionRate: cfg.PlannerSessionRate,
		}
}
